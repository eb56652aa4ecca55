// The pages over tern's resources (emails, domains, API keys, webhooks): thin callers of the
// same services as the REST API.
import type { Hono } from "hono";
import type { DashEnv } from "./routes.tsx";

export function registerResourcePages(_app: Hono<DashEnv>): void {}
