// What bench/dashboard.ts seeds and times, shared with its Worker (bench/dashboard/worker.ts).
// No imports: Node reads it too. The filters are worker/dashboard/email-search.ts's EmailFilters.

/** Emails seeded: five in six are the bench account's (1,000,000), the rest four others'. */
export const TOTAL = 1_200_000;

/** The cases the bench times; `after` pages are the second page of their filter. */
export const CASES: Record<string, { f: { q?: string; status?: string; from?: string; to?: string }; label: string }> = {
  first: { f: {}, label: "first page (no filter)" },
  second: { f: {}, label: "second page (no filter)" },
  delivered: { f: { status: "delivered" }, label: "status delivered (~90%)" },
  bounced: { f: { status: "bounced" }, label: "status bounced (0.5%)" },
  complained: { f: { status: "complained" }, label: "status complained (0.05%)" },
  bouncedDay: { f: { status: "bounced", from: "", to: "" }, label: "status bounced, one day's range" },
  recipient: { f: { q: "user4242@example.com" }, label: "recipient (an address with ~20 emails)" },
  recipientStatus: { f: { q: "User4242@Example.com", status: "delivered" }, label: "recipient and status delivered" },
};

