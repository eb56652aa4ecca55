// A local certificate authority and a leaf certificate it signs, for TLS on loopback:
// workerd verifies every peer and cannot be told not to, so local TLS peers (test relays,
// the SMTP bridge) present a leaf from this CA, and NODE_EXTRA_CA_CERTS points at a bundle
// of the system CAs plus this one. Generated once per directory with the openssl CLI.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface LocalCertificates {
  caCertPath: string;
  certPath: string;
  keyPath: string;
  /** System CAs plus the local CA: the value for NODE_EXTRA_CA_CERTS. */
  bundlePath: string;
}

const SYSTEM_BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"];

/** The leaf's name (its files are named after it) and subjectAltName; localhost by default. */
export interface LeafName { name: string; subjectAltName: string; caName?: string }

const LOCALHOST: LeafName = { name: "localhost", subjectAltName: "DNS:localhost,IP:127.0.0.1,IP:::1" };

export function ensureLocalCertificates(dir: string, leaf: LeafName = LOCALHOST): LocalCertificates {
  mkdirSync(dir, { recursive: true });
  const paths = {
    caKeyPath: join(dir, "ca.key"),
    caCertPath: join(dir, "ca.crt"),
    keyPath: join(dir, `${leaf.name}.key`),
    csrPath: join(dir, `${leaf.name}.csr`),
    extPath: join(dir, `${leaf.name}.ext`),
    certPath: join(dir, `${leaf.name}.crt`),
    bundlePath: join(dir, "ca-bundle.crt"),
  };
  if (!existsSync(paths.certPath) || !existsSync(paths.bundlePath)) {
    const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650",
      "-keyout", paths.caKeyPath, "-out", paths.caCertPath, "-subj", `/CN=${leaf.caName ?? "tern local CA"}`,
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-keyout", paths.keyPath,
      "-out", paths.csrPath, "-subj", `/CN=${leaf.name}`);
    writeFileSync(paths.extPath, [
      "basicConstraints=CA:FALSE",
      "keyUsage=critical,digitalSignature,keyEncipherment",
      "extendedKeyUsage=serverAuth",
      `subjectAltName=${leaf.subjectAltName}`,
    ].join("\n"));
    openssl("x509", "-req", "-in", paths.csrPath, "-CA", paths.caCertPath, "-CAkey", paths.caKeyPath,
      "-CAcreateserial", "-days", "825", "-sha256", "-extfile", paths.extPath, "-out", paths.certPath);
    const system = SYSTEM_BUNDLES.filter((p) => existsSync(p)).map((p) => readFileSync(p, "utf8"));
    writeFileSync(paths.bundlePath, [...system, readFileSync(paths.caCertPath, "utf8")].join("\n"));
  }
  return { caCertPath: paths.caCertPath, certPath: paths.certPath, keyPath: paths.keyPath, bundlePath: paths.bundlePath };
}
