// What a reader would miss on this page, as a list of sentences (empty: nothing).
// - The page scrolls sideways: something is wider than the window.
// - A box scrolls sideways, unless all it holds is one table: a table wider than the
//   window may scroll in its own box while its caption and notes stay in view.
// - An element is cut off: partly outside the box that clips it (overflow other than
//   visible) where no scrolling reaches it, or partly outside the page at the top or left.
// An element wholly outside its clipping box or the page is hidden on purpose (an
// off-canvas menu) and is not counted; of a cut-off element, only the outermost is named.
(() => {
  const problems = [];
  const page = document.documentElement;
  const describe = (element) => {
    const classes = typeof element.className === "string" && element.className.trim()
      ? "." + element.className.trim().split(/\s+/).slice(0, 3).join(".") : "";
    const text = (element.textContent || "").trim().replace(/\s+/g, " ").slice(0, 50);
    return `<${element.tagName.toLowerCase()}${element.id ? "#" + element.id : ""}${classes}> "${text}"`;
  };
  const scrolls = (value) => value === "auto" || value === "scroll";
  const reported = new Set();
  const insideReported = (element) => {
    for (let up = element.parentElement; up; up = up.parentElement) if (reported.has(up)) return true;
    return false;
  };
  if (page.scrollWidth > page.clientWidth + 1)
    problems.push(`the page is ${page.scrollWidth} px wide in a ${page.clientWidth} px window`);
  for (const element of document.querySelectorAll("body *")) {
    const style = getComputedStyle(element);
    if (style.display === "none" || style.visibility === "hidden") continue;
    const box = element.getBoundingClientRect();
    if (box.width < 1 || box.height < 1 || insideReported(element)) continue;
    if (box.right <= 0 || box.bottom + window.scrollY <= 0) continue;  // off-canvas on purpose
    const found = [];
    const onlyATable = element.children.length === 1 && element.firstElementChild.tagName === "TABLE";
    if (scrolls(style.overflowX) && element.scrollWidth > element.clientWidth + 1 && !onlyATable)
      found.push(`scrolls sideways: ${element.scrollWidth} px in ${element.clientWidth} px`);
    if (box.left < -1 || box.top + window.scrollY < -1)
      found.push(`sticks out of the page (left ${Math.round(box.left)}, top ${Math.round(box.top + window.scrollY)})`);
    for (let clipper = element.parentElement; clipper && clipper !== page; clipper = clipper.parentElement) {
      const clip = getComputedStyle(clipper);
      if (clip.overflowX === "visible" && clip.overflowY === "visible") continue;
      // What a clipping box shows: its padding box, or, where it scrolls, all it scrolls to.
      const outer = clipper.getBoundingClientRect();
      const left = outer.left + clipper.clientLeft - clipper.scrollLeft;
      const top = outer.top + clipper.clientTop - clipper.scrollTop;
      const right = scrolls(clip.overflowX) ? left + clipper.scrollWidth : outer.left + clipper.clientLeft + clipper.clientWidth;
      const bottom = scrolls(clip.overflowY) ? top + clipper.scrollHeight : outer.top + clipper.clientTop + clipper.clientHeight;
      if (box.right <= left || box.left >= right || box.bottom <= top || box.top >= bottom) continue;
      const sides = [];
      if (clip.overflowX !== "visible" && box.left < left - 1) sides.push(`left by ${Math.round(left - box.left)} px`);
      if (clip.overflowX !== "visible" && box.right > right + 1) sides.push(`right by ${Math.round(box.right - right)} px`);
      if (clip.overflowY !== "visible" && box.top < top - 1) sides.push(`top by ${Math.round(top - box.top)} px`);
      if (clip.overflowY !== "visible" && box.bottom > bottom + 1) sides.push(`bottom by ${Math.round(box.bottom - bottom)} px`);
      if (sides.length) found.push(`is cut off at the ${sides.join(", ")} by ${describe(clipper)}`);
    }
    if (found.length) {
      reported.add(element);
      problems.push(`${describe(element)} ${found.join("; ")}`);
    }
  }
  return problems;
})()
