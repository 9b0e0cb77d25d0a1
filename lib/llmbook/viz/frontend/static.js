// Appended to render.js in the static HTML book (scripts/build_html.py): draws every saved
// explorer of the page with the same `render`, from the state the notebook saved. A small
// stand-in for the widget model keeps the selection in the page (no kernel, no network).
function staticModel(state) {
  const handlers = {};
  return {
    get: (key) => state[key],
    set: (key, value) => {
      if (state[key] === value) return;
      state[key] = value;
      for (const f of handlers[`change:${key}`] || []) f();
    },
    save_changes: () => {},
    on: (event, f) => { (handlers[event] = handlers[event] || []).push(f); },
    off: (event, f) => { handlers[event] = (handlers[event] || []).filter((g) => g !== f); },
  };
}

for (const host of document.querySelectorAll(".llmbook-static-front")) {
  const data = host.querySelector("script.llmbook-static-state");
  const mount = host.querySelector(".llmbook-static-mount");
  if (data && mount) render({ model: staticModel(JSON.parse(data.textContent)), el: mount });
}
