/**
 * Which secret's use the claim shard stamps (src/claims/secret-use.ts): the one that verified the delivery, when the
 * source had more than one to choose from (a rotation, or several kept secrets). With a single secret there is
 * nothing to tell apart, so nothing is stamped and the happy path writes no more rows than it did; a secret whose
 * name the adapter does not report (Plaid) is never stamped either.
 */
export function secretToStamp(verifiedBy: string | undefined, secretsToChooseFrom: number): string | undefined {
  return secretsToChooseFrom > 1 ? verifiedBy : undefined;
}
