/**
 * The proxy configs of the reverse-proxy guide (docs/proxies.md), read from the page as a reader copies them, and
 * made runnable on loopback: only the addresses and certificate paths change, each replacement found
 * exactly once, so a README edit that the test no longer matches fails loudly instead of testing something else.
 */
import { readFile } from "node:fs/promises";

const GUIDE = new URL("../../docs/proxies.md", import.meta.url);

/** The fenced block of `lang` in the reverse-proxy guide (there must be exactly one). */
export async function readmeBlock(lang: "nginx" | "haproxy" | "caddy"): Promise<string> {
  const text = await readFile(GUIDE, "utf8");
  const blocks = [...text.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\`\\n`, "g"))];
  if (blocks.length !== 1)
    throw new Error(`expected one \`\`\`${lang} block in docs/proxies.md, found ${blocks.length}`);
  return blocks[0][1];
}

/** `text` with `from` replaced by `to`; `from` must occur exactly once. */
export function replaceOnce(text: string, from: string, to: string): string {
  const at = text.indexOf(from);
  if (at < 0 || text.indexOf(from, at + from.length) >= 0)
    throw new Error(`the README's config no longer holds exactly one ${JSON.stringify(from)}`);
  return text.slice(0, at) + to + text.slice(at + from.length);
}

export interface Loopback {
  /** host:port of the API server. */
  upstream: string;
  /** Port the proxy listens on (127.0.0.1). */
  port: number;
  certFile: string;
  keyFile: string;
}

/** The README's nginx block, pointed at loopback. */
export function nginxSite(block: string, at: Loopback): string {
  let conf = replaceOnce(block, "server 127.0.0.1:3001;", `server ${at.upstream};`);
  conf = replaceOnce(conf, "listen 443 ssl;", `listen 127.0.0.1:${at.port} ssl;`);
  conf = replaceOnce(conf, "/etc/ssl/agent-api/fullchain.pem", at.certFile);
  return replaceOnce(conf, "/etc/ssl/agent-api/privkey.pem", at.keyFile);
}

/** The README's HAProxy block, pointed at loopback; `pemFile` holds the certificate chain and its key. */
export function haproxyConfig(
  block: string,
  at: Omit<Loopback, "certFile" | "keyFile">,
  pemFile: string,
): string {
  let conf = replaceOnce(
    block,
    "bind :443 ssl crt /etc/haproxy/certs/agent-api.pem",
    `bind 127.0.0.1:${at.port} ssl crt ${pemFile}`,
  );
  conf = replaceOnce(conf, "server api1 127.0.0.1:3001", `server api1 ${at.upstream}`);
  return conf;
}

/**
 * The README's Caddy block, pointed at loopback, under the global options a test run needs (the block itself
 * has none): no admin endpoint, no HTTP->HTTPS redirect server on port 80, no listener beyond 127.0.0.1.
 */
export function caddyfile(block: string, at: Loopback): string {
  let conf = replaceOnce(block, "api.example.com {", `https://127.0.0.1:${at.port} {`);
  conf = replaceOnce(conf, "/etc/ssl/agent-api/fullchain.pem", at.certFile);
  conf = replaceOnce(conf, "/etc/ssl/agent-api/privkey.pem", at.keyFile);
  conf = replaceOnce(
    conf,
    "reverse_proxy @agent_api 127.0.0.1:3001",
    `reverse_proxy @agent_api ${at.upstream}`,
  );
  return `{
    admin off
    auto_https disable_redirects
    default_bind 127.0.0.1
    servers {
        protocols h1 h2
    }
}

${conf}`;
}
