// Node-side servers the worker tests talk to over loopback: SMTP peers standing in for
// relays of every kind. Their ports reach the workerd tests as the TEST_PEERS binding.
import type { TestProject } from "vitest/node";
import { startHttpsFiles } from "./support/https-files.ts";
import { startSmtpPeers } from "./support/smtp-peers.ts";

declare module "vitest" {
  export interface ProvidedContext {
    peers: Record<string, number>;
  }
}

export default async function setup(project: TestProject) {
  const peers = await startSmtpPeers();
  const httpsFiles = await startHttpsFiles(); // attachment `path` fetches
  project.provide("peers", { ...peers.ports, https: httpsFiles.port });
  return async () => {
    await peers.close();
    await httpsFiles.close();
  };
}
