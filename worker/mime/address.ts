// Mailboxes (RFC 5322 section 3.4): parse what callers send, and format it for a header
// without ever letting a display name or an address break out of its header field.

import { domainToUnicode } from "node:url";
import { encodeWords } from "./encoding.ts";

export interface Address {
  name?: string;
  email: string;
}

const LOCAL_PART_MAX = 64;
const ADDRESS_MAX = 254;
const LABEL_MAX = 63;
// Line room for a single display-name token: " " + token + "," stays within 78.
const TOKEN_MAX = 76;

// C0 controls, DEL and C1 controls: never part of an address or a display name.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-";
const DOT_ATOM = new RegExp(`^[${ATEXT}]+(?:\\.[${ATEXT}]+)*$`);
const ASCII_LABEL = /^[a-z0-9-]+$/;
const UNICODE_LABEL = /^[\p{L}\p{M}\p{N}-]+$/u;
// An unquoted display name may not contain what would change the structure of the field:
// another address or group (",", ";", ":"), an address ("<", ">"), quoting ("\"", "\\").
const UNQUOTED_NAME_FORBIDDEN = /[<>",;:\\]/;
const PLAIN_PHRASE = new RegExp(`^[${ATEXT}]+(?: [${ATEXT}]+)*$`);

const utf8 = new TextEncoder();

/**
 * Parses one mailbox: `a@b.c`, `Name <a@b.c>`, `"Quoted, Name" <a@b.c>`. Returns null when
 * it is not a valid single mailbox. The domain comes back in its one canonical spelling
 * ({@link canonicalDomain}); internationalized domains stay in Unicode (use
 * {@link toAsciiEmail} for the envelope).
 */
export function parseMailbox(input: string): Address | null {
  if (typeof input !== "string" || CONTROL.test(input)) return null;
  const s = input.trim();
  if (!s.endsWith(">")) {
    const email = normalizeAddrSpec(s);
    return email === null ? null : { email };
  }
  const lt = s.lastIndexOf("<");
  if (lt < 0) return null;
  const email = normalizeAddrSpec(s.slice(lt + 1, -1).trim());
  if (email === null) return null;
  const name = parseDisplayName(s.slice(0, lt).trim());
  if (name === null) return null;
  return name === "" ? { email } : { name, email };
}

/** Formats for a header: the display name is RFC 2047 encoded when non-ASCII and quoted
 * when it has specials; the addr-spec is never broken (an IDN domain is written as A-labels).
 * Throws a TypeError when `a.email` is not a valid addr-spec. */
export function formatMailbox(a: Address): string {
  return formatMailboxTokens(a).join(" ");
}

/** The domain part, lower-cased. */
export function domainOf(email: string): string {
  return email.slice(email.lastIndexOf("@") + 1).toLowerCase();
}

/** The address with its domain as ASCII (A-labels, lower-cased): what goes into SMTP
 * MAIL FROM / RCPT TO and into headers. Throws a TypeError for an invalid addr-spec. */
export function toAsciiEmail(email: string): string {
  const normalized = normalizeAddrSpec(email);
  if (normalized === null) throw new TypeError("invalid email address");
  const at = normalized.lastIndexOf("@");
  const domain = normalized.slice(at + 1);
  return normalized.slice(0, at + 1) + (isAscii(domain) ? domain : asciiDomain(domain));
}

/** A domain as ASCII: A-labels, lower case. Throws a TypeError when it is not a domain. */
export function toAsciiDomain(domain: string): string {
  const lower = domain.toLowerCase();
  return isAscii(lower) ? lower : asciiDomain(lower);
}

/**
 * The mailbox as tokens separated by single spaces; a header may fold between tokens.
 * Each name token is at most 76 characters; the last token is `<addr-spec>` (or the bare
 * addr-spec when there is no name).
 */
export function formatMailboxTokens(a: Address): string[] {
  const email = toAsciiEmail(a.email);
  const name = a.name ?? "";
  if (name.trim() === "") return [email];
  return [...displayNameTokens(name), `<${email}>`];
}

function displayNameTokens(name: string): string[] {
  const printableAscii = /^[\x20-\x7e]*$/.test(name);
  // "=?" in plain text would be decoded by the reader as an encoded-word: encode it instead.
  if (printableAscii && !name.includes("=?")) {
    if (PLAIN_PHRASE.test(name)) {
      const words = name.split(" ");
      if (words.every((w) => w.length <= TOKEN_MAX)) return words;
    }
    const quoted = `"${name.replace(/["\\]/g, "\\$&")}"`;
    if (quoted.length <= TOKEN_MAX) return [quoted];
  }
  return encodeWords(name, 75, 75);
}

function parseDisplayName(raw: string): string | null {
  if (raw === "") return "";
  if (raw.startsWith('"')) {
    let out = "";
    for (let i = 1; i < raw.length; i++) {
      const c = raw[i]!;
      if (c === "\\") {
        i++;
        if (i >= raw.length) return null;
        out += raw[i];
      } else if (c === '"') {
        // The quoted-string must be the whole display name.
        return i === raw.length - 1 ? out.trim() : null;
      } else {
        out += c;
      }
    }
    return null;
  }
  return UNQUOTED_NAME_FORBIDDEN.test(raw) ? null : raw;
}

/** Validates an addr-spec and returns it with its domain's canonical spelling, or null. */
function normalizeAddrSpec(addr: string): string | null {
  if (CONTROL.test(addr) || /\s/.test(addr)) return null;
  const at = addr.lastIndexOf("@");
  if (at <= 0) return null;
  const local = addr.slice(0, at);
  let domain = addr.slice(at + 1).toLowerCase();
  // Local parts are ASCII dot-atoms: quoted local parts and SMTPUTF8 are not supported.
  if (local.length > LOCAL_PART_MAX || !DOT_ATOM.test(local)) return null;
  if (!isValidDomain(domain)) return null;
  try {
    domain = canonicalDomain(domain);
  } catch {
    return null;
  }
  const email = `${local}@${domain}`;
  if (utf8.encode(email).length > ADDRESS_MAX) return null;
  return email;
}

/**
 * One spelling per domain. Delivery writes the domain as A-labels, and IDNA (UTS #46) maps
 * case, full-width letters and A-labels onto one name: `ｅxample.com` is example.com and
 * `xn--exmple-cua.com` is exämple.com. Stored and compared in this form, an address cannot
 * pass a suppression or make a second contact by being spelled another way. Unicode where
 * the name has U-labels (people read those), ASCII otherwise. Throws when it is not a domain.
 */
export function canonicalDomain(domain: string): string {
  const lower = domain.toLowerCase();
  if (isAscii(lower) && !lower.includes("xn--")) return lower;
  const ascii = asciiDomain(lower);
  if (!ascii.includes("xn--")) return ascii;
  const unicode = domainToUnicode(ascii);
  // A U-label tern's own rules do not take (an emoji, a joiner) stays an A-label, so that the
  // canonical form parses again as itself.
  return unicode !== "" && isValidDomain(unicode) ? unicode : ascii;
}

/** How an address is kept and looked up where one row stands for one mailbox (contacts,
 * suppressions): lower-cased, its domain in its canonical spelling. */
export function addressKey(email: string): string {
  return withDomain(email.trim().toLowerCase(), canonicalDomain);
}

/** An address key with its domain as A-labels: the spelling an older row may hold. */
export function asciiAddressKey(key: string): string {
  return withDomain(key, toAsciiDomain);
}

/** The address with its domain rewritten; as it is when it has none or the domain is no
 * domain (validation refuses such an address before anything is stored under it). */
function withDomain(email: string, rewrite: (domain: string) => string): string {
  const at = email.lastIndexOf("@");
  if (at < 0) return email;
  try {
    return email.slice(0, at + 1) + rewrite(email.slice(at + 1));
  } catch {
    return email;
  }
}

function isValidDomain(domain: string): boolean {
  const labels = domain.split(".");
  if (labels.length < 2) return false;
  for (const label of labels) {
    if (label === "" || label.startsWith("-") || label.endsWith("-")) return false;
    if (isAscii(label)) {
      if (label.length > LABEL_MAX || !ASCII_LABEL.test(label)) return false;
    } else if (!UNICODE_LABEL.test(label)) {
      return false;
    }
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1]!)) return false;
  if (isAscii(domain)) return true;
  // An internationalized domain must convert to A-labels with the same shape.
  let ascii: string;
  try {
    ascii = asciiDomain(domain);
  } catch {
    return false;
  }
  const asciiLabels = ascii.split(".");
  return (
    asciiLabels.length === labels.length &&
    asciiLabels.every((l) => l.length > 0 && l.length <= LABEL_MAX && ASCII_LABEL.test(l)) &&
    ascii.length <= ADDRESS_MAX
  );
}

// The WHATWG URL parser applies UTS #46 (IDNA) to hostnames; it is in every runtime tern uses.
function asciiDomain(domain: string): string {
  const host = new URL(`http://${domain}/`).hostname;
  if (host === "") throw new TypeError("invalid domain");
  return host;
}

function isAscii(s: string): boolean {
  return /^[\x00-\x7f]*$/.test(s);
}
