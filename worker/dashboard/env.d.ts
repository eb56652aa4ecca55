// Optional secrets of the dashboard (wrangler.toml lists only the required MASTER_KEY).
interface DashboardSecrets {
  GOOGLE_CLIENT_SECRET?: string;
  GITHUB_CLIENT_SECRET?: string;
}
declare namespace Cloudflare {
  interface Env extends DashboardSecrets {}
}
interface Env extends DashboardSecrets {}
