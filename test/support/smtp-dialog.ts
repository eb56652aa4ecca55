// A line-by-line SMTP client for tests that need to see each reply (what EHLO offers, what a
// refused command answers) or to stop half-way through a message. Plain TCP, implicit TLS,
// or STARTTLS on an open dialog.
import { connect as tcpConnect, type Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";

export interface Reply {
  code: number;
  lines: string[];
  /** All lines' text after the code, joined with "\n". */
  text: string;
}

export class SmtpDialog {
  #socket: Socket | TLSSocket;
  #buffer = "";
  #lines: string[] = [];
  #waiting: ((r: Reply) => void) | null = null;
  #closed = false;

  private constructor(socket: Socket | TLSSocket) {
    this.#socket = socket;
    this.#attach(socket);
  }

  static async open(port: number, o: { tls?: boolean; ca?: Buffer | string; host?: string } = {}): Promise<{ dialog: SmtpDialog; greeting: Reply }> {
    const host = o.host ?? "127.0.0.1";
    const socket = await new Promise<Socket | TLSSocket>((resolve, reject) => {
      const s = o.tls
        ? tlsConnect({ host, port, servername: "localhost", ca: o.ca }, () => resolve(s))
        : tcpConnect({ host, port }, () => resolve(s));
      s.once("error", reject);
    });
    const dialog = new SmtpDialog(socket);
    return { dialog, greeting: await dialog.reply() };
  }

  get closed(): boolean {
    return this.#closed;
  }

  #attach(socket: Socket | TLSSocket): void {
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => {
      this.#buffer += d;
      let nl: number;
      while ((nl = this.#buffer.indexOf("\n")) >= 0) {
        const line = this.#buffer.slice(0, nl).replace(/\r$/, "");
        this.#buffer = this.#buffer.slice(nl + 1);
        this.#lines.push(line);
        if (/^\d{3} /.test(line) || /^\d{3}$/.test(line)) this.#deliver();
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      this.#closed = true;
      if (this.#waiting) {
        const w = this.#waiting;
        this.#waiting = null;
        w({ code: 0, lines: this.#lines.splice(0), text: "(connection closed)" });
      }
    });
  }

  #ready: Reply[] = [];
  #deliver(): void {
    const lines = this.#lines.splice(0);
    const reply = { code: Number(lines.at(-1)!.slice(0, 3)), lines, text: lines.map((l) => l.slice(4)).join("\n") };
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = null;
      w(reply);
    } else this.#ready.push(reply);
  }

  /** The next reply (waits for it). */
  reply(timeoutMs = 30_000): Promise<Reply> {
    const ready = this.#ready.shift();
    if (ready) return Promise.resolve(ready);
    if (this.#closed) return Promise.resolve({ code: 0, lines: [], text: "(connection closed)" });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no SMTP reply in time")), timeoutMs);
      this.#waiting = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
    });
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => (this.#socket.write(data) ? resolve() : this.#socket.once("drain", () => resolve())));
  }

  async command(line: string, timeoutMs?: number): Promise<Reply> {
    await this.write(line + "\r\n");
    return this.reply(timeoutMs);
  }

  /** STARTTLS, then the TLS handshake on the same connection. */
  async startTls(ca: Buffer | string): Promise<Reply> {
    const r = await this.command("STARTTLS");
    if (r.code !== 220) return r;
    const plain = this.#socket;
    plain.removeAllListeners("data");
    plain.removeAllListeners("close");
    this.#socket = await new Promise<TLSSocket>((resolve, reject) => {
      const s = tlsConnect({ socket: plain, servername: "localhost", ca }, () => resolve(s));
      s.once("error", reject);
    });
    this.#attach(this.#socket);
    return r;
  }

  /** EHLO + AUTH PLAIN as user `tern`. */
  async login(key: string, name = "tern"): Promise<Reply> {
    const ehlo = await this.command("EHLO client.test");
    if (ehlo.code !== 250) return ehlo;
    return this.command(`AUTH PLAIN ${Buffer.from(`\0${name}\0${key}`).toString("base64")}`);
  }

  close(): void {
    this.#socket.destroy();
  }
}
