// A wrangler environment inherits none of wrangler.toml's [vars]: an `[env.eu]` that restates
// only what differs gets every other setting from the code's defaults. So each default in the
// code must be what wrangler.toml states; otherwise such an environment would quietly behave
// differently (mail to the simulator's addresses sent for real, broadcasts unpaced).
import { describe, expect, it } from "vitest";
import { mediaLimitsOf, readConfig } from "../../worker/config.ts";
import { broadcastRateOf } from "../../worker/broadcasts/fanout.ts";
import { providerUrls } from "../../worker/dashboard/auth.ts";
import { REGIONS } from "../../worker/regions.ts";

// wrangler.toml as text (the Worker tests read no files; vite inlines it).
const [toml] = Object.values(import.meta.glob("../../wrangler.toml", { query: "?raw", import: "default", eager: true }) as Record<string, string>);

/** wrangler.toml's [vars], as `KEY = "value"` lines up to the next table. */
function tomlVars(): Record<string, string> {
  const section = /^\[vars\]\n([\s\S]*?)^\[/m.exec(toml!)![1]!;
  return Object.fromEntries([...section.matchAll(/^(\w+)\s*=\s*"([^"]*)"/gm)].map((m) => [m[1]!, m[2]!]));
}

/** Everything a setting decides, functions read out for each region. */
function settings(env: Record<string, string>) {
  const { region, ...config } = readConfig(env as unknown as Env);
  return {
    ...config,
    regions: REGIONS.map((name) => region(name)),
    broadcastRate: broadcastRateOf(env),
    media: mediaLimitsOf(env),
    providers: providerUrls(env),
  };
}

describe("the code's defaults are wrangler.toml's values", () => {
  it("a Worker given none of wrangler.toml's [vars] reads the same settings as one given all of them", () => {
    const vars = tomlVars();
    expect(Object.keys(vars).length).toBeGreaterThan(20);
    expect(settings({})).toEqual(settings(vars));
  });

  it("the check sees a var that differs from its default", () => {
    // Proof the comparison is not blind: the simulator's domains and the broadcast pace count.
    expect(settings({ SIMULATOR_DOMAINS: "" })).not.toEqual(settings({}));
    expect(settings({ BROADCAST_RATE: "0" })).not.toEqual(settings({}));
    expect(settings({ GITHUB_API_URL: "http://127.0.0.1:1/" })).not.toEqual(settings({}));
    expect(settings({}).simulatorDomains).toEqual(["simulator.tern.test", "resend.dev"]);
  });
});
