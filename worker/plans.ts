// Plans (contract 4.4): emails a month (UTC calendar month), and a daily cap on the free plan.
export const PLANS = {
  free: { monthly: 3_000, daily: 100 },
  pro_50k: { monthly: 50_000 },
  pro_100k: { monthly: 100_000 },
  scale_200k: { monthly: 200_000 },
  scale_500k: { monthly: 500_000 },
  scale_1m: { monthly: 1_000_000 },
  scale_1_5m: { monthly: 1_500_000 },
  scale_2_5m: { monthly: 2_500_000 },
} as const satisfies Record<string, { monthly: number; daily?: number }>;

export type PlanName = keyof typeof PLANS;

export function isPlan(name: string): name is PlanName {
  return Object.hasOwn(PLANS, name);
}

export function planLimits(name: string): { monthly: number; daily?: number } {
  return isPlan(name) ? PLANS[name] : PLANS.free;
}
