// A line diff of two short texts (a transform's output now and in a draft), by longest common subsequence: the lines
// both keep are shown once, what only one has is marked - (now) or + (the draft).

/**
 * @param {string[]} before
 * @param {string[]} after
 * @returns {string[]} each line prefixed "  ", "- " or "+ "
 */
export function lineDiff(before, after) {
  // kept[i][j]: how many lines before[i..] and after[j..] have in common, in order.
  const kept = Array.from({ length: before.length + 1 }, () => new Array(after.length + 1).fill(0));
  for (let i = before.length - 1; i >= 0; i--)
    for (let j = after.length - 1; j >= 0; j--)
      kept[i][j] = before[i] === after[j] ? kept[i + 1][j + 1] + 1 : Math.max(kept[i + 1][j], kept[i][j + 1]);
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < before.length || j < after.length) {
    if (i < before.length && j < after.length && before[i] === after[j]) {
      lines.push(`  ${before[i++]}`);
      j++;
    } else if (i < before.length && (j === after.length || kept[i + 1][j] >= kept[i][j + 1]))
      // Of two lines that differ, now's goes first, as a diff reads.
      lines.push(`- ${before[i++]}`);
    else lines.push(`+ ${after[j++]}`);
  }
  return lines;
}
