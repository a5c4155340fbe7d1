// Run by api/client's TestTypeScriptClient against a real service whose
// provider loses its first answer; skipped without PAYMENTS_URL.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryKeyStore, createPayment, newPaymentsClient, retryAfterMs } from "../src/index.js";

const url = process.env.PAYMENTS_URL;
const apiKey = process.env.PAYMENTS_API_KEY ?? "";
const order = process.env.ORDER_ID ?? "pedido-ts-1";

test("createPayment survives a lost answer with one key", { skip: !url && "PAYMENTS_URL is not set" }, async () => {
  const keys = new MemoryKeyStore();
  const sent: string[] = [];
  let unstored = 0;
  // Loses the first answer after the service has sent it.
  const lossy: typeof fetch = async (input, init) => {
    const req = new Request(input, init);
    const key = req.headers.get("Idempotency-Key") ?? "";
    if ((await keys.loadOrStore(order, "not-the-key")) !== key) unstored++;
    sent.push(key);
    const res = await fetch(req);
    if (sent.length === 1) {
      await res.arrayBuffer();
      throw new TypeError("fetch failed: connection reset after the request was sent");
    }
    return res;
  };
  const waits: number[] = [];
  const client = newPaymentsClient(url!, apiKey, lossy);
  const r = await createPayment(client, order, {
    order_id: order, amount: 2000, currency: "BRL", payment_method: "pm_card_visa", capture_method: "manual",
  }, { keys, baseDelayMs: 1, maxDelayMs: 8, sleep: async (ms) => { waits.push(ms); } });

  assert.equal(r.status, 201, JSON.stringify(r.problem));
  assert.equal(r.payment?.status, "authorized");
  assert.ok(sent.length >= 2, `sends: ${sent.length}`);
  assert.equal(waits.length, sent.length - 1);
  assert.equal(new Set(sent).size, 1, "every send carries the intent's one key");
  assert.ok(sent[0].length >= 40, "the key is 32 random bytes");
  assert.equal(unstored, 0, "the key was stored before the first send");
});

test("Retry-After in seconds and as a date", () => {
  assert.equal(retryAfterMs("2"), 2000);
  assert.equal(retryAfterMs(null), 0);
  assert.equal(retryAfterMs("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
});
