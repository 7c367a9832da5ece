// What `check` says of a rotation: for each valid source listing several secrets, the receiver's verification health
// (GET /admin/api/sources/<source>, docs/operating.md "Verification health"), one warn line per message:
// "`STRIPE_SECRET_OLD` still verifies 4 % of deliveries; …" or "… last used 3 days ago; safe to remove". Only such
// sources ask the receiver, so a check of a config without a rotation stays offline.

import { adminRequest } from "./http.mjs";
import { firstLine } from "./project.mjs";

/**
 * @param {Record<string, any>} sources the config's SOURCES tables
 * @param {string[]} valid the sources the Worker's own checks accept
 * @param {import("./project.mjs").ProjectOptions} options
 * @returns {Promise<{ ok: string[], warnings: string[] }>}
 */
export async function rotationVerdicts(sources, valid, options) {
  const rotating = valid.filter((name) => Array.isArray(sources[name]?.secrets) && sources[name].secrets.length > 1);
  /** @type {string[]} */
  const ok = [];
  /** @type {string[]} */
  const warnings = [];
  for (const name of rotating) {
    /** @type {{ verification: { warnings: string[] } }} */
    let answer;
    try {
      answer = await adminRequest(options, `/sources/${encodeURIComponent(name)}`);
    } catch (error) {
      warnings.push(
        `source ${name} lists ${sources[name].secrets.length} secrets; which of them still verify was not read: ${firstLine(error)}`,
      );
      continue;
    }
    if (answer.verification.warnings.length === 0) ok.push(`source ${name}: its secrets' use calls for nothing yet`);
    for (const message of answer.verification.warnings) warnings.push(`source ${name}: ${message}`);
  }
  return { ok, warnings };
}
