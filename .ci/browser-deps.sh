#!/usr/bin/env bash
# The dashboard's browser tests drive Debian's chromium through playwright-core (never a downloaded browser).
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and cannot be installed here; browser tests will fail" >&2
  fi
fi
