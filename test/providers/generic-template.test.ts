import { describe, expect, it } from "vitest";
import { adapterFor } from "../../src/providers/registry";

/**
 * A `generic` template that signs two variable parts with nothing between them signs one string that splits more
 * than one way: the same signed bytes, read as another id and body, are another event under the same signature
 * (the hole HubSpot and Square had with URL ‖ body, test/providers/presets.test.ts). Such a table fails validation.
 */

describe("generic: signed_content with two placeholders side by side", () => {
  const table = (signedContent: string) => ({
    provider: "generic",
    signature_header: "x-sig",
    signed_content: signedContent,
    id_header: "x-id",
    timestamp_header: "x-ts",
    event_key_header: "x-id",
  });
  const problemsOf = (options: Record<string, unknown>) => adapterFor("generic")!.validateOptions!(options);
  const ambiguous = (pair: string) =>
    `signed_content puts ${pair} with nothing between them: the signed bytes split there more than one way, so a captured delivery could be resent as another id or body (put the sender's separator between them)`;

  it("is refused where the boundary is not fixed: id ‖ body, body ‖ id, URL ‖ body, id ‖ timestamp", () => {
    expect(problemsOf(table("{id}{timestamp}.{body}"))).toEqual([ambiguous("{id}{timestamp}")]);
    expect(problemsOf(table("{timestamp}.{id}{body}"))).toEqual([ambiguous("{id}{body}")]);
    expect(problemsOf(table("{timestamp}.{body}{id}"))).toEqual([ambiguous("{body}{id}")]);
    expect(problemsOf(table("{url}{body}{timestamp}{id}"))).toEqual([
      ambiguous("{url}{body}"),
      ambiguous("{timestamp}{id}"),
    ]);
  });

  it("is accepted with a separator between, or a timestamp beside the body (a digit moved is a time ten times off)", () => {
    expect(problemsOf(table("{id}.{timestamp}.{body}"))).toEqual([]);
    expect(
      problemsOf({
        provider: "generic",
        signature_header: "x-sig",
        signed_content: "{timestamp}{body}",
        timestamp_header: "x-ts",
      }),
    ).toEqual([]);
    expect(problemsOf(table("{id}:{body}{timestamp}"))).toEqual([]);
  });
});
