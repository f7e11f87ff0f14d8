/**
 * The sandbox's seccomp filter, a classic BPF program that bubblewrap loads (`--seccomp FD`) before it runs
 * the command. It refuses the few system calls that get around the sandbox's limits or widen the kernel
 * surface an untrusted command can reach, and nothing a build, a test run or a shell needs:
 * - `fallocate`: with FALLOC_FL_KEEP_SIZE it reserves blocks without growing the file, so RLIMIT_FSIZE (the
 *   disk quota's per-command bound) does not apply, and one call could fill the host's disk between two quota
 *   measurements. EOPNOTSUPP, as a file system without it answers: glibc's posix_fallocate then writes
 *   the blocks itself, within the limits.
 * - io_uring: its requests (fallocate among them) run outside the system calls this filter sees.
 * - the kernel keyrings (not namespaced), userfaultfd, perf_event_open and bpf: kernel surface no tool needs.
 * System calls of another ABI (32-bit x86, x32) kill the process: their numbers differ and would slip past.
 */

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_RET_K = 0x06;

const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
const SECCOMP_RET_KILL_PROCESS = 0x80000000;

/** Offsets in `struct seccomp_data`. */
const NR_OFFSET = 0;
const ARCH_OFFSET = 4;

const EOPNOTSUPP = 95;
const ENOSYS = 38;
const EPERM = 1;

/** x32 system calls are the x86_64 numbers with this bit set. */
const X32_SYSCALL_BIT = 0x40000000;

interface ArchTable {
  /** AUDIT_ARCH_* of the native ABI. */
  audit: number;
  /** Numbers at or above this (x32's bit) are another ABI. */
  foreignFrom?: number;
  numbers: Record<RefusedCall, number>;
}

type RefusedCall =
  | "fallocate"
  | "io_uring_setup"
  | "io_uring_enter"
  | "io_uring_register"
  | "add_key"
  | "request_key"
  | "keyctl"
  | "userfaultfd"
  | "perf_event_open"
  | "bpf";

/** The errno each refused call gets. */
const REFUSALS: Record<RefusedCall, number> = {
  fallocate: EOPNOTSUPP,
  io_uring_setup: ENOSYS,
  io_uring_enter: ENOSYS,
  io_uring_register: ENOSYS,
  add_key: ENOSYS,
  request_key: ENOSYS,
  keyctl: ENOSYS,
  userfaultfd: EPERM,
  perf_event_open: EPERM,
  bpf: EPERM,
};

/** From the kernel's arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h. */
const ARCHES: Partial<Record<NodeJS.Architecture, ArchTable>> = {
  x64: {
    audit: 0xc000003e,
    foreignFrom: X32_SYSCALL_BIT,
    numbers: {
      fallocate: 285,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      add_key: 248,
      request_key: 249,
      keyctl: 250,
      userfaultfd: 323,
      perf_event_open: 298,
      bpf: 321,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    numbers: {
      fallocate: 47,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      add_key: 217,
      request_key: 218,
      keyctl: 219,
      userfaultfd: 282,
      perf_event_open: 241,
      bpf: 280,
    },
  },
};

/** This machine's numbers of the refused calls (tests make the calls by number). */
export function refusedCallNumbers(
  arch: NodeJS.Architecture = process.arch,
): Record<RefusedCall, number> | null {
  return ARCHES[arch]?.numbers ?? null;
}

/** One `struct sock_filter` (host byte order, as the kernel reads it). */
function instruction(code: number, jt: number, jf: number, k: number): Buffer {
  const buffer = Buffer.alloc(8);
  buffer.writeUInt16LE(code, 0);
  buffer.writeUInt8(jt, 2);
  buffer.writeUInt8(jf, 3);
  buffer.writeUInt32LE(k >>> 0, 4);
  return buffer;
}

/** The filter for this machine's architecture, or null where we have no table (the sandbox then runs without). */
export function seccompProgram(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const table = ARCHES[arch];
  if (!table || isBigEndian()) return null;
  const program: Buffer[] = [
    instruction(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
    // Native ABI: skip the kill.
    instruction(BPF_JEQ_K, 1, 0, table.audit),
    instruction(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
    instruction(BPF_LD_W_ABS, 0, 0, NR_OFFSET),
  ];
  if (table.foreignFrom !== undefined) {
    program.push(instruction(BPF_JGE_K, 0, 1, table.foreignFrom));
    program.push(instruction(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS));
  }
  for (const [call, errno] of Object.entries(REFUSALS) as [RefusedCall, number][]) {
    // Equal: fall into the refusal; otherwise jump over it.
    program.push(instruction(BPF_JEQ_K, 0, 1, table.numbers[call]));
    program.push(instruction(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno));
  }
  program.push(instruction(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW));
  return Buffer.concat(program);
}

/** The tables above are written for little-endian machines (both architectures we know are). */
function isBigEndian(): boolean {
  return new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1;
}
