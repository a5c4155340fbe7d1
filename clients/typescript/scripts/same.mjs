// Fails unless the committed generated types equal a fresh generation.
import { readFileSync, rmSync } from "node:fs";

const [committed, fresh] = process.argv.slice(2);
const same = readFileSync(committed, "utf8") === readFileSync(fresh, "utf8");
rmSync(fresh);
if (!same) {
  console.error(`${committed} is stale: run npm run generate (make ts-generate)`);
  process.exit(1);
}
