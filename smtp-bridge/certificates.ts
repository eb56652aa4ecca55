// The TLS certificate and key, read from files and read again when either changes (an ACME
// client renewing them in place or swapping a symlink), without a restart. A pair that does
// not load (a half-written file, a key that does not match) is ignored until the next check,
// and the previous pair stays in use.
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { createSecureContext } from "node:tls";

export interface CertificatePair {
  cert: Buffer;
  key: Buffer;
  /** The leaf's subject, validity end and SHA-256 fingerprint, for logs and /health. */
  subject: string;
  notAfter: string;
  fingerprint: string;
  loadedAt: string;
}

/** Reads and checks a pair: throws when the files do not make a usable TLS context. */
export function loadCertificatePair(certFile: string, keyFile: string): CertificatePair {
  const cert = readFileSync(certFile);
  const key = readFileSync(keyFile);
  createSecureContext({ cert, key }); // throws on a bad PEM or a key that does not match
  const leaf = new X509Certificate(cert);
  return {
    cert,
    key,
    subject: leaf.subject.replace(/\n/g, ", "),
    notAfter: new Date(leaf.validTo).toISOString(),
    fingerprint: leaf.fingerprint256,
    loadedAt: new Date().toISOString(),
  };
}

function stamp(file: string): string {
  try {
    const s = statSync(file); // follows symlinks: a swapped link changes ino
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return "missing";
  }
}

export interface CertificateWatcher {
  current(): CertificatePair;
  stop(): void;
}

/** Loads the pair now (throws if it cannot) and checks the files every `everyMs`. */
export function watchCertificates(
  certFile: string,
  keyFile: string,
  everyMs: number,
  onChange: (pair: CertificatePair) => void,
  onError: (err: Error) => void,
): CertificateWatcher {
  let pair = loadCertificatePair(certFile, keyFile);
  let seen = stamp(certFile) + "|" + stamp(keyFile);
  let failedOn = "";
  const timer = setInterval(() => {
    const now = stamp(certFile) + "|" + stamp(keyFile);
    if (now === seen) return;
    try {
      pair = loadCertificatePair(certFile, keyFile);
      seen = now;
      failedOn = "";
      onChange(pair);
    } catch (err) {
      // Report a bad pair once, and keep looking: the other file may be on its way.
      if (failedOn !== now) onError(err as Error);
      failedOn = now;
    }
  }, everyMs);
  timer.unref();
  return { current: () => pair, stop: () => clearInterval(timer) };
}
