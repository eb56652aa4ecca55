// A message as it was received, kept once while it is read by the one-pass multipart reader
// (multipart.ts): in memory while it fits (the spool's threshold for a message, and its memory
// for all of them: spool.ts), then in one file of the bridge's spool
// (as an MTA writes its queue). Its attachments are ranges of it, read
// again when the request is written; and a message that reader declines is read again from it
// by mailparser. It is removed when its message has been answered (discardParts).
import { randomUUID } from "node:crypto";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { SpoolError, type Spool } from "./spool.ts";

/** Bytes gathered before a write to the file, and read at a time: few, large calls (each
 * costs a promise and a trip to libuv's thread pool). */
const IO_BLOCK = 256 * 1024;

export class RawStore {
  readonly #spool: Spool;
  /** The message while in memory; once in the file, what waits for the next write. */
  #chunks: Buffer[] = [];
  #unwritten = 0;
  #length = 0;
  #path: string | null = null;
  /** Opened once, for writing and then reading. */
  #file: Promise<FileHandle> | null = null;
  /** Writes to the file, in order. */
  #writing: Promise<void> = Promise.resolve();
  #closed = false;
  /** Bytes counted in the spool's memory (the message while in memory). */
  #held = 0;

  constructor(spool: Spool) {
    this.#spool = spool;
  }

  get length(): number {
    return this.#length;
  }

  /** True once the message is in a file. */
  get spilled(): boolean {
    return this.#path !== null;
  }

  /** Keeps `chunk` (which must not change afterwards). A returned promise is for the file:
   * wait for it before the next chunk, so that at most a block waits in memory. */
  append(chunk: Buffer): Promise<void> | null {
    this.#length += chunk.length;
    this.#chunks.push(chunk);
    if (!this.#path) {
      const spool = this.#spool;
      if (spool.dir === null) return null;
      if (this.#length <= spool.threshold && spool.memory.take(chunk.length)) {
        this.#held += chunk.length;
        return null;
      }
      // Past the message's threshold, or the memory of all messages is taken: to the file.
      this.#giveBack();
      this.#path = join(spool.dir, randomUUID());
      this.#file = open(this.#path, "wx+", 0o600);
      this.#file.catch(() => {}); // a failure is reported by the write that waits for it
      this.#unwritten = this.#length;
    } else this.#unwritten += chunk.length;
    return this.#unwritten >= IO_BLOCK ? this.#flush() : null;
  }

  #flush(): Promise<void> {
    const chunks = this.#chunks;
    this.#chunks = [];
    this.#unwritten = 0;
    this.#writing = this.#writing.then(async () => {
      if (this.#closed || !chunks.length) return;
      let written: number;
      try {
        ({ bytesWritten: written } = await (await this.#file!).writev(chunks));
      } catch (err) {
        throw new SpoolError(`the spool could not take a message: ${(err as Error).message}`);
      }
      // A write cut short (a full disk) would shift every later byte: the message is refused for now.
      if (written !== chunks.reduce((n, c) => n + c.length, 0)) throw new SpoolError("the spool could not take a message: a short write");
    });
    return this.#writing;
  }

  /** Every byte is in the file, when there is one (the message has ended). */
  async finish(): Promise<void> {
    if (this.#path) await this.#flush();
  }

  /** The bytes from `start` to `end`, in pieces. A piece from the file is read into one
   * buffer, reused for each read: use each piece before asking for the next. */
  async *read(start: number, end: number): AsyncGenerator<Buffer> {
    if (this.#closed) throw new Error("the message has been discarded");
    if (!this.#path) {
      let at = 0;
      for (const c of this.#chunks) {
        const from = Math.max(start, at);
        const to = Math.min(end, at + c.length);
        if (from < to) yield c.subarray(from - at, to - at);
        at += c.length;
        if (at >= end) return;
      }
      return;
    }
    await this.finish();
    const file = await this.#file!;
    const buffer = Buffer.allocUnsafeSlow(Math.min(IO_BLOCK, end - start));
    for (let at = start; at < end; ) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(buffer.length, end - at), at);
      if (!bytesRead) throw new SpoolError("the spooled message is shorter than it was");
      yield buffer.subarray(0, bytesRead);
      at += bytesRead;
    }
  }

  #giveBack(): void {
    this.#spool.memory.give(this.#held);
    this.#held = 0;
  }

  /** Removes the message (its file); safe to call more than once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#giveBack();
    this.#chunks = [];
    await this.#writing.catch(() => {});
    const file = await this.#file?.catch(() => null);
    await file?.close().catch(() => {});
    if (this.#path) await unlink(this.#path).catch(() => {});
  }
}
