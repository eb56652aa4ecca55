// The simulator: addresses at the reserved test domains never leave tern. The local part
// (before any +label) picks what happens, and the same events follow as for real mail:
//   delivered@  accepted by the "recipient's server" (delivered)
//   bounced@    rejected permanently (550 5.1.1)
//   complained@ delivered, then reported as spam (complained)
//   delayed@    deferred on the first attempt (delivery_delayed), delivered on the retry
// Any other local part is delivered.
import type { RecipientResult } from "./transport.ts";

export interface SimulatedResult extends RecipientResult {
  complained?: boolean;
}

export function isSimulated(recipient: string, simulatorDomains: string[]): boolean {
  const domain = recipient.slice(recipient.lastIndexOf("@") + 1).toLowerCase();
  return simulatorDomains.includes(domain);
}

export function simulate(recipient: string, attempt: number): SimulatedResult {
  const local = recipient.slice(0, recipient.lastIndexOf("@")).toLowerCase().split("+")[0];
  switch (local) {
    case "bounced":
      return { recipient, status: "rejected", code: 550, enhancedCode: "5.1.1", message: "550 5.1.1 The email account that you tried to reach does not exist (simulated)." };
    case "complained":
      return { recipient, status: "accepted", code: 250, message: "250 2.0.0 OK (simulated)", complained: true };
    case "delayed":
      if (attempt <= 1) return { recipient, status: "deferred", code: 451, enhancedCode: "4.2.0", message: "451 4.2.0 Mailbox temporarily unavailable (simulated)." };
      return { recipient, status: "accepted", code: 250, message: "250 2.0.0 OK (simulated)" };
    default:
      return { recipient, status: "accepted", code: 250, message: "250 2.0.0 OK (simulated)" };
  }
}
