// Types for each published OpenAPI document (docs/openapi/<game>.json) with openapi-typescript's
// default flags, written to generated/<game>.ts: what an engine team gets from `npx
// openapi-typescript`. One node process for every game (a start is ~1 s on a busy 2-core box).
import fs from "node:fs";
import path from "node:path";
import openapiTS, { astToString } from "openapi-typescript";

const [docsDir, outDir, ...games] = process.argv.slice(2);
fs.mkdirSync(outDir, { recursive: true });
for (const game of games) {
  const source = new URL(`file://${path.resolve(docsDir, `${game}.json`)}`);
  const ast = await openapiTS(source);
  fs.writeFileSync(path.join(outDir, `${game}.ts`), astToString(ast));
}
