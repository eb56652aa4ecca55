// Contact properties (Resend's /contact-properties): the keys an account's contacts may carry
// in `properties`, each with a type (string or number) and a fallback used when a contact has
// no value. A contact's values are checked against them: an unknown key or a value of the
// wrong type is a 422 that names it.
import { and, eq, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { contactProperties, contacts, type ContactPropertyRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { d1ErrorText } from "../sending/quota.ts";
import { changeContactsInChunks, type ContactEnv } from "./contacts.ts";

export type PropertyType = "string" | "number";
export type PropertyValue = string | number;
export type PropertyValues = Record<string, PropertyValue>;

/** Letters, digits and underscores, at most 50 (Resend's rule). */
export const PROPERTY_KEY = /^[A-Za-z0-9_]{1,50}$/;
/** The longest string a property value (or fallback) may be. */
export const MAX_PROPERTY_VALUE_LENGTH = 2000;
/** How many properties one request may set. */
export const MAX_PROPERTIES_PER_REQUEST = 100;

/** C0 control characters but tab: no header can carry them (a NUL or CR in a name would make
 * every broadcast subject built from it unsendable) and no person's name or value needs them. */
const CONTROL = /[\u0000-\u0008\u000A-\u001F]/;

/** Refuses a contact text field holding a control character, naming the field (422). */
export function refuseControlCharacters(field: string, value: unknown): void {
  if (typeof value !== "string") return;
  const m = CONTROL.exec(value);
  if (m) {
    const code = `U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
    throw new ApiError("validation_error", `\`${field}\` contains a control character (${code}); names and property values may not hold control characters other than tab.`);
  }
}

/** Whether a text holds a control character refuseControlCharacters would refuse. */
export function hasControlCharacters(value: string): boolean {
  return CONTROL.test(value);
}

export function fallbackOf(row: ContactPropertyRow): PropertyValue | null {
  return row.fallbackJson === null ? null : (JSON.parse(row.fallbackJson) as PropertyValue);
}

function checkFallback(type: PropertyType, fallback: unknown): void {
  if (fallback === undefined || fallback === null) return;
  if (typeof fallback !== type) throw new ApiError("validation_error", `\`fallback_value\` must be a ${type}, as the property's type is.`);
  refuseControlCharacters("fallback_value", fallback);
}

export async function createProperty(db: D1Database, accountId: string, input: { key: string; type: PropertyType; fallback?: PropertyValue | null }, now = Date.now()): Promise<ContactPropertyRow> {
  checkFallback(input.type, input.fallback);
  const row: ContactPropertyRow = {
    id: uuidv7(now),
    accountId,
    key: input.key,
    type: input.type,
    fallbackJson: input.fallback === undefined || input.fallback === null ? null : JSON.stringify(input.fallback),
    createdAt: now,
  };
  try {
    await drizzle(db).insert(contactProperties).values(row);
  } catch (err) {
    if (/UNIQUE constraint failed/i.test(d1ErrorText(err))) throw new ApiError("validation_error", `A contact property with the key ${input.key} already exists.`);
    throw err;
  }
  return row;
}

export async function findProperty(db: D1Database, accountId: string, id: string): Promise<ContactPropertyRow | undefined> {
  return drizzle(db).select().from(contactProperties).where(and(eq(contactProperties.accountId, accountId), eq(contactProperties.id, id))).get();
}

export async function listProperties(db: D1Database, accountId: string, page: Page) {
  const q = pageQuery(contactProperties.id, page, eq(contactProperties.accountId, accountId));
  return finishPage(await drizzle(db).select().from(contactProperties).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

/** Every property of the account, by key (for personalisation and for checking contact values). */
export async function propertiesByKey(db: D1Database, accountId: string): Promise<Map<string, ContactPropertyRow>> {
  const rows = await drizzle(db).select().from(contactProperties).where(eq(contactProperties.accountId, accountId));
  return new Map(rows.map((r) => [r.key, r]));
}

/** Only the fallback may change (the key and type are what contacts' values were checked against). */
export async function updateProperty(db: D1Database, accountId: string, id: string, fallback: PropertyValue | null | undefined): Promise<ContactPropertyRow | undefined> {
  const row = await findProperty(db, accountId, id);
  if (!row || fallback === undefined) return row;
  checkFallback(row.type, fallback);
  const fallbackJson = fallback === null ? null : JSON.stringify(fallback);
  await drizzle(db).update(contactProperties).set({ fallbackJson }).where(eq(contactProperties.id, id));
  return { ...row, fallbackJson };
}

/** Removes the key from every contact that has it (each reports contact.updated), then the definition. */
export async function deleteProperty(env: ContactEnv, accountId: string, id: string, now = Date.now()): Promise<ContactPropertyRow | undefined> {
  const row = await findProperty(env.DB, accountId, id);
  if (!row) return undefined;
  const d = drizzle(env.DB);
  const path = "$." + row.key;
  const having = await d.select({ id: contacts.id }).from(contacts).where(and(eq(contacts.accountId, accountId), sql`json_type(${contacts.propertiesJson}, ${path}) IS NOT NULL`));
  await changeContactsInChunks(env, accountId, having.map((c) => c.id), (ids) => [
    d.update(contacts).set({ propertiesJson: sqlRemoveKey(row.key) }).where(and(eq(contacts.accountId, accountId), inArray(contacts.id, ids))),
  ], now);
  await d.delete(contactProperties).where(eq(contactProperties.id, id));
  return row;
}

function sqlRemoveKey(key: string) {
  // The key is letters, digits and underscores only (PROPERTY_KEY), so the JSON path is safe.
  return sql`json_remove(${contacts.propertiesJson}, ${"$." + key})`;
}

/** The values a request gives, checked against the account's properties: null removes a key. */
export async function checkPropertyValues(db: D1Database, accountId: string, values: Record<string, unknown>): Promise<Record<string, PropertyValue | null>> {
  const defined = await propertiesByKey(db, accountId);
  const out: Record<string, PropertyValue | null> = {};
  for (const [key, value] of Object.entries(values)) {
    const def = defined.get(key);
    if (!def) throw new ApiError("validation_error", `\`properties.${key}\` is not a contact property of this account; create it first with POST /contact-properties.`);
    if (value !== null && typeof value !== def.type) throw new ApiError("validation_error", `\`properties.${key}\` must be a ${def.type}.`);
    if (typeof value === "number" && !Number.isFinite(value)) throw new ApiError("validation_error", `\`properties.${key}\` must be a finite number.`);
    if (typeof value === "string" && value.length > MAX_PROPERTY_VALUE_LENGTH) throw new ApiError("validation_error", `\`properties.${key}\` must be at most ${MAX_PROPERTY_VALUE_LENGTH} characters.`);
    refuseControlCharacters(`properties.${key}`, value);
    out[key] = value as PropertyValue | null;
  }
  return out;
}

export function mergeProperties(current: PropertyValues, change: Record<string, PropertyValue | null>): PropertyValues {
  const out: PropertyValues = { ...current };
  for (const [k, v] of Object.entries(change)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}
