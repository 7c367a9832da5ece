import { describe, expect, it } from "vitest";
import { apiError } from "../../src/lib/errors";

describe("apiError", () => {
  it("carries status, code, message and headers as data, and renders the one envelope from them", async () => {
    const error = apiError(503, "claim_unavailable", "The delivery could not be stored; retry later.", {
      "retry-after": "5",
    });
    expect({
      status: error.status,
      code: error.code,
      message: error.message,
      retryAfter: error.headers.get("retry-after"),
    }).toEqual({
      status: 503,
      code: "claim_unavailable",
      message: "The delivery could not be stored; retry later.",
      retryAfter: "5",
    });
    const response = error.getResponse();
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(await response.json()).toEqual({
      error: { code: "claim_unavailable", message: "The delivery could not be stored; retry later." },
    });
  });
});
