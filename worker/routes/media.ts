// Images uploaded in the dashboard's editor, served to every reader's mail client: public, no
// API key, the signed path is the only authority (worker/media/images.ts says why). Registered
// on the plain router: its segments are tokens, not the UUIDs defineRoute's parameters match.
import type { App } from "../app.ts";
import { serveImage } from "../media/images.ts";

export function registerMediaRoutes(app: App): void {
  // ?size=thumb: the dashboard's thumbnail of it (worker/media/images.ts).
  app.get("/media/:account/:id/:file", (c) => serveImage(c.env, c.req.param("account"), c.req.param("id"), c.req.param("file"), c.req.query("size") === "thumb"));
}
