// An optional secret (wrangler.toml lists only the required MASTER_KEY): the Cloudflare API
// token tern manages tracking hosts' custom hostnames with (worker/tracking/custom-hostnames.ts).
interface CustomHostnameSecrets {
  CLOUDFLARE_API_TOKEN?: string;
}
declare namespace Cloudflare {
  interface Env extends CustomHostnameSecrets {}
}
interface Env extends CustomHostnameSecrets {}
