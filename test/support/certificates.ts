import { join } from "node:path";
import { ensureLocalCertificates, type LocalCertificates } from "../../dev/certs.ts";

/** The test run's local CA and leaf, kept beside the other local state (never committed). */
export function prepareTestCertificates(): LocalCertificates {
  return ensureLocalCertificates(join(process.cwd(), ".tern", "test-certs"));
}
