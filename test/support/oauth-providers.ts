// Google and GitHub for sign-in tests: two real OAuth 2.0 servers (oauth2-mock-server: signed
// tokens, PKCE checks, auto-approve) on loopback. "Google" is OIDC (discovery, ID token,
// userinfo); "GitHub" is plain OAuth 2.0 with GitHub's /user and /user/emails.
import { OAuth2Server } from "oauth2-mock-server";

export interface Identity {
  sub: string;
  email: string;
  name: string;
}

export interface OAuthProviders {
  env: Record<string, string>;
  google: { identity: Identity };
  github: { identity: Identity };
  /** Token requests that arrived without a PKCE verifier (should stay 0). */
  withoutPkce: () => number;
  stop(): Promise<void>;
}

export async function startOAuthProviders(): Promise<OAuthProviders> {
  const google = new OAuth2Server();
  const github = new OAuth2Server();
  await google.issuer.keys.generate("RS256");
  await github.issuer.keys.generate("RS256");
  await google.start(0, "127.0.0.1");
  await github.start(0, "127.0.0.1");
  const g = { identity: { sub: "google-1", email: "g.user@example.com", name: "Gina Google" } };
  const h = { identity: { sub: "4242", email: "h.user@example.com", name: "Hal Hub" } };
  let withoutPkce = 0;
  for (const server of [google, github]) {
    server.service.on("beforeTokenSigning", (token: { payload: Record<string, unknown> }, req: { body?: Record<string, unknown> }) => {
      if (req.body?.grant_type === "authorization_code" && !req.body.code_verifier) withoutPkce++;
    });
  }
  google.service.on("beforeTokenSigning", (token: { payload: Record<string, unknown> }) => {
    Object.assign(token.payload, { email: g.identity.email, email_verified: true, name: g.identity.name });
  });
  // The ID token's sub is set after beforeTokenSigning (to "johndoe"); the userinfo must agree.
  google.service.on("beforeUserinfo", (res: { body: Record<string, unknown> }) => {
    res.body = { sub: "johndoe", email: g.identity.email, email_verified: true, name: g.identity.name };
  });
  github.service.addRoute("GET", "/user", (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: Number(h.identity.sub), login: "halhub", name: h.identity.name, email: null }));
  });
  github.service.addRoute("GET", "/user/emails", (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify([
      { email: "unverified@example.com", primary: false, verified: false },
      { email: h.identity.email, primary: true, verified: true },
    ]));
  });
  const gUrl = google.issuer.url!;
  const hUrl = github.issuer.url!;
  return {
    env: {
      GOOGLE_CLIENT_ID: "tern-google-client",
      GOOGLE_CLIENT_SECRET: "google-secret-for-tests",
      GOOGLE_DISCOVERY_URL: `${gUrl}/.well-known/openid-configuration`,
      GITHUB_CLIENT_ID: "tern-github-client",
      GITHUB_CLIENT_SECRET: "github-secret-for-tests",
      GITHUB_AUTHORIZE_URL: `${hUrl}/authorize`,
      GITHUB_TOKEN_URL: `${hUrl}/token`,
      GITHUB_API_URL: hUrl,
    },
    google: g,
    github: h,
    withoutPkce: () => withoutPkce,
    async stop() {
      await google.stop();
      await github.stop();
    },
  };
}
