/**
 * A response in a content coding: the suite sends no Accept-Encoding (so, by RFC 9110, any coding is
 * acceptable), and a proxy in front of a deployment may compress what the API wrote. The body is decoded
 * as it streams (a stream's arrival times stay those of its frames), with node:zlib, for every coding a
 * browser or curl decodes; a coding nobody can decode is said as such rather than read as a broken body.
 */
import { pipeline, type Readable } from "node:stream";
import * as zlib from "node:zlib";

type Decoder = () => NodeJS.ReadWriteStream;

const DECODERS: Record<string, Decoder | undefined> = {
  gzip: () => zlib.createGunzip(),
  "x-gzip": () => zlib.createGunzip(),
  // HTTP's deflate is the zlib format; a raw deflate stream (a known server mistake) is read too.
  deflate: () => zlib.createUnzip(),
  br: () => zlib.createBrotliDecompress(),
  // Node 23.8+; on an older Node, zstd is named as a coding that cannot be decoded.
  zstd: "createZstdDecompress" in zlib ? () => zlib.createZstdDecompress() : undefined,
};

/** The codings applied, in the order they were applied (identity left out), lower-cased. */
export function contentCodings(header: string | string[] | undefined): string[] {
  const value = Array.isArray(header) ? header.join(",") : (header ?? "");
  return value
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
}

export class UndecodableCodingError extends Error {
  constructor(coding: string) {
    super(`the response is in the content coding "${coding}", which the suite cannot decode`);
    this.name = "UndecodableCodingError";
  }
}

/** `body` decoded of `codings` (undone last first); `body` itself when there are none. */
export function decodedBody(body: Readable, codings: string[]): Readable {
  if (codings.length === 0) return body;
  const decoders = [...codings].reverse().map((coding) => {
    const make = DECODERS[coding];
    if (!make) throw new UndecodableCodingError(coding);
    return make();
  });
  // A fault anywhere (a truncated or corrupt body) destroys every stage and surfaces on the last one.
  return pipeline([body, ...decoders], () => {}) as unknown as Readable;
}
