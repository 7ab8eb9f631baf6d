// How well a code matches a search, for every code search (the annotate picker, the adjudication
// form): 0 the exact name or key, 1 a name or key that starts with it, 2 a word of the name that
// does, 3 anywhere in the name or key, 4 in the definition; null no match. Reads the element's
// data-name, data-key and data-definition (lower case).
window.Parallax = window.Parallax || {};
window.Parallax.rankCode = function (element, query) {
  "use strict";
  const name = element.dataset.name;
  const key = element.dataset.key;
  if (name === query || key === query) return 0;
  if (name.startsWith(query) || key.startsWith(query)) return 1;
  if (name.split(/[\s/\-–]+/).some((word) => word.startsWith(query))) return 2;
  if (name.includes(query) || key.includes(query)) return 3;
  if ((element.dataset.definition || "").includes(query)) return 4;
  return null;
};
