// The payments API for TypeScript: the types openapi-typescript generates
// from openapi.yaml (schema.d.ts), an openapi-fetch client, and
// createPayment, the caller's half of the idempotency contract.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Payment = components["schemas"]["Payment"];
export type Refund = components["schemas"]["Refund"];
export type Problem = components["schemas"]["Problem"];
export type CreatePaymentRequest = components["schemas"]["CreatePaymentRequest"];
export type PaymentsClient = Client<paths>;

/** A typed client of the API, authenticated with the account's API key. */
export function newPaymentsClient(baseUrl: string, apiKey: string, fetchImpl?: typeof fetch): PaymentsClient {
  return createClient<paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${apiKey}` },
    ...(fetchImpl ? { fetch: fetchImpl } : {}),
  });
}

/**
 * Keeps the Idempotency-Key of each payment intent, so every retry of the
 * intent, also after a restart, sends the key of the first try. Back it by
 * your database (a column beside the order, written before the request
 * leaves); MemoryKeyStore only covers retries within one process.
 */
export interface KeyStore {
  /** The key stored for intent or, when none, stores key and returns it; atomically. */
  loadOrStore(intent: string, key: string): Promise<string>;
}

/** A KeyStore in memory, the default. */
export class MemoryKeyStore implements KeyStore {
  readonly #keys = new Map<string, string>();
  async loadOrStore(intent: string, key: string): Promise<string> {
    const have = this.#keys.get(intent);
    if (have !== undefined) return have;
    this.#keys.set(intent, key);
    return key;
  }
}

/** An unpredictable Idempotency-Key: 32 bytes of getRandomValues, base64url. */
export function newIdempotencyKey(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  return Buffer.from(b).toString("base64url");
}

export interface CreateOptions {
  /** Where each intent's key lives; default: one MemoryKeyStore per process. */
  keys?: KeyStore;
  /** Sends of one call (default 6). */
  maxAttempts?: number;
  /** Bounds of the exponential backoff with full jitter (default 500 ms, 30 s); a longer Retry-After wins. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  signal?: AbortSignal;
  /** Replaces the timer between attempts (tests). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** A final answer: 201/200 with the payment, or a problem that a retry cannot change. */
export interface CreateResult {
  status: number;
  payment?: Payment;
  problem?: Problem;
  response: Response;
}

/** The attempts ran out while the outcome was still unknown (202) or the key in use: keep the key, try later. */
export class NotFinalError extends Error {
  constructor(readonly last: CreateResult | undefined, readonly cause?: unknown) {
    super("payment outcome not final yet; retry later with the same intent");
  }
}

const defaultKeys = new MemoryKeyStore();

/**
 * Creates the payment of intent (a name for this checkout's try, such as
 * the order id) with the intent's one key, stored before the first send,
 * retrying network errors, 202, 409 idempotency_key_in_use, 429 and 5xx
 * with backoff; never with a new key. After declined, failed or canceled,
 * a new try of the order is a new intent ("pedido-842/2").
 */
export async function createPayment(
  client: PaymentsClient, intent: string, body: CreatePaymentRequest, opts: CreateOptions = {},
): Promise<CreateResult> {
  const key = await (opts.keys ?? defaultKeys).loadOrStore(intent, newIdempotencyKey());
  const attempts = opts.maxAttempts ?? 6;
  let last: CreateResult | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) await pause(attempt, last?.response, opts);
    try {
      const { data, error, response } = await client.POST("/v1/payments", {
        params: { header: { "Idempotency-Key": key } }, body, signal: opts.signal,
      });
      last = { status: response.status, payment: data, problem: error as Problem | undefined, response };
      lastError = undefined;
      if (!retriable(last)) return last;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      lastError = err; // the request may have been applied: retry with the same key
    }
  }
  throw new NotFinalError(last, lastError);
}

function retriable(r: CreateResult): boolean {
  if (r.status === 202 || r.status === 429 || r.status >= 500) return true;
  return r.status === 409 && r.problem?.code === "idempotency_key_in_use";
}

async function pause(attempt: number, last: Response | undefined, opts: CreateOptions): Promise<void> {
  const base = opts.baseDelayMs ?? 500;
  const ceiling = Math.min(opts.maxDelayMs ?? 30_000, base * 2 ** (attempt - 1));
  const ms = Math.max(Math.random() * ceiling, retryAfterMs(last?.headers.get("Retry-After")));
  await (opts.sleep ?? sleep)(ms, opts.signal);
}

/** Retry-After in seconds or as an HTTP date, in milliseconds. */
export function retryAfterMs(v: string | null | undefined): number {
  if (!v) return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? 0 : Math.max(at - Date.now(), 0);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener("abort", stop); resolve(); }, ms);
    const stop = () => { clearTimeout(t); reject(signal?.reason); };
    signal?.addEventListener("abort", stop, { once: true });
  });
}
