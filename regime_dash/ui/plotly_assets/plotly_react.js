// The dashboard's Plotly chart as a streamlit components v2 module (mounted in the page, no iframe).
//
// Streamlit calls the default export on the first mount and again with every new `data` for the
// same chart key, always with the same parentElement: the graph div made on the first call is kept
// and each new figure is drawn into it with Plotly.react (one drawing per figure). plotly.js is the
// partial bundle vendored beside this file, loaded once per page by a <script> tag. Any failure is
// shown as a line of text in place of the chart, never as a JavaScript traceback.

const LOADS = (window.__regimeDashPlotlyLoads = window.__regimeDashPlotlyLoads || new Map());

function loadPlotly(url) {
  if (window.Plotly && typeof window.Plotly.react === "function") return Promise.resolve(window.Plotly);
  let loading = LOADS.get(url);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.async = true;
      script.dataset.regimeDashPlotly = url;
      script.onload = () => (window.Plotly && typeof window.Plotly.react === "function")
        ? resolve(window.Plotly)
        : reject(new Error(`${url} loaded but defined no Plotly`));
      script.onerror = () => {
        script.remove();
        reject(new Error(`could not load ${url}`));
      };
      document.head.appendChild(script);
    });
    // a failed load is tried again by the next figure, not remembered for the page's life
    loading.catch(() => LOADS.delete(url));
    LOADS.set(url, loading);
  }
  return loading;
}

function say(chart, text, problem) {
  chart.status.textContent = text;
  chart.status.hidden = !text;
  chart.status.className = problem ? "rd-plotly-status rd-plotly-problem" : "rd-plotly-status";
}

function message(err) {
  return (err && err.message) ? err.message : String(err);
}

function watchWidth(chart, Plotly) {
  if (chart.observer || typeof ResizeObserver === "undefined") return;
  chart.width = chart.gd.clientWidth;
  // the figure has no width of its own (autosize): it follows its column when the window or the
  // sidebar changes; the first observation (the width it was drawn at) redraws nothing
  chart.observer = new ResizeObserver(() => {
    const width = chart.gd.clientWidth;
    if (!width || width === chart.width || !chart.gd._fullLayout) return;
    chart.width = width;
    Promise.resolve(Plotly.Plots.resize(chart.gd)).catch(() => {});
  });
  chart.observer.observe(chart.root);
}

function listen(chart, setTriggerValue) {
  if (chart.listening || typeof chart.gd.on !== "function") return;
  chart.listening = true;
  // a box dragged on the chart, as st.plotly_chart's selection reports it: {box: [{x: [a, b]}]}
  chart.gd.on("plotly_selected", (event) => {
    if (!chart.events.includes("selection") || !event || !event.range) return;
    const box = Object.fromEntries(Object.entries(event.range).map(([axis, range]) => [axis.replace(/\d+$/, ""), range]));
    setTriggerValue("selection", {box: [box]});
  });
  // a click on a point of a trace that carries `meta` (a verdict marker): {meta, x}; under a unified
  // hover the click reports every trace near the cursor, so the point of such a trace is looked for
  chart.gd.on("plotly_click", (event) => {
    if (!chart.events.includes("click") || !event || !event.points) return;
    const point = event.points.find((p) => p.data && p.data.meta && typeof p.data.meta === "object");
    if (point) setTriggerValue("click", {meta: point.data.meta, x: point.x});
  });
}

// The page's theme laid over the figure's template, as st.plotly_chart's "streamlit" theme
// does: its text colour, font and border colour (streamlit's CSS variables on the page) and a
// transparent background. In the template, so that what the figure's layout sets still wins.
function themed(layout, root) {
  const css = getComputedStyle(root);
  const value = (name) => css.getPropertyValue(name).trim();
  const text = value("--st-text-color"), family = value("--st-font"), border = value("--st-border-color");
  const theme = {paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)"};
  if (text || family) theme.font = Object.assign({}, text ? {color: text} : {}, family ? {family} : {});
  const template = Object.assign({}, layout.template || {});
  const base = Object.assign({}, template.layout || {}, theme);
  if (border) {
    for (const axis of ["xaxis", "yaxis"]) {
      base[axis] = Object.assign({}, base[axis] || {}, {gridcolor: border, zerolinecolor: border});
    }
  }
  if (text) base.legend = Object.assign({}, base.legend || {}, {font: {color: text}});
  template.layout = base;
  return Object.assign({}, layout, {template});
}

async function drain(chart, setTriggerValue) {
  if (chart.busy) return;
  chart.busy = true;
  try {
    while (chart.next) {
      // only the newest figure is drawn: figures that came while one was drawing are skipped
      const data = chart.next;
      chart.next = null;
      // a rerun that sends the figure drawn already (a fragment's rerun after a click, say) draws nothing:
      // the same JSON text with the same config and events is the same chart
      const text = typeof data.figure === "string" ? data.figure : null;
      const config = JSON.stringify(data.config || {}), events = JSON.stringify(data.events || []);
      if (chart.drawn && text !== null && text === chart.text && config === chart.config && events === chart.eventsText) {
        continue;
      }
      let figure = data.figure || {};
      try {
        if (typeof figure === "string") figure = JSON.parse(figure);  // the figure as its JSON text
      } catch (err) {
        say(chart, `The chart could not be drawn: its figure is not JSON (${message(err)}).`, true);
        continue;
      }
      if (!figure || typeof figure !== "object" || typeof data.bundle !== "string") {
        say(chart, "The chart could not be drawn: it was sent no figure.", true);
        continue;
      }
      const layout = themed(figure.layout || {}, chart.root);
      if (!chart.drawn && layout.height) chart.gd.style.minHeight = `${layout.height}px`;
      let Plotly;
      try {
        // served from the component's asset_dir: beside this module; else by the page's file route
        const base = data.bundle_base === "module" ? import.meta.url : document.baseURI;
        Plotly = await loadPlotly(new URL(data.bundle, base).href);
      } catch (err) {
        say(chart, `The chart could not be drawn: plotly.js did not load (${message(err)}). Reload the page to try again.`, true);
        continue;
      }
      chart.events = data.events || [];
      try {
        await Plotly.react(chart.gd, figure.data || [], layout, data.config || {});
        chart.drawn = true;
        Object.assign(chart, {text, config, eventsText: events});
        chart.gd.style.minHeight = "";
        say(chart, "", false);
        watchWidth(chart, Plotly);
        listen(chart, setTriggerValue);
      } catch (err) {
        say(chart, `The chart could not be drawn: ${message(err)}`, true);
      }
    }
  } finally {
    chart.busy = false;
  }
}

export default function render({ data, parentElement, setTriggerValue }) {
  let chart = parentElement.__regimeDashChart;
  if (!chart) {
    const root = document.createElement("div");
    root.className = "rd-plotly";
    const status = document.createElement("div");
    status.setAttribute("role", "status");
    const gd = document.createElement("div");
    gd.className = "rd-plotly-graph";
    root.append(status, gd);
    parentElement.appendChild(root);
    chart = parentElement.__regimeDashChart = {root, status, gd, next: null, busy: false, drawn: false,
                                              observer: null, listening: false, events: [], width: 0,
                                              text: null, config: null, eventsText: null};
    say(chart, "Loading the chart…", false);
  }
  chart.next = data || {};
  drain(chart, setTriggerValue).catch((err) => say(chart, `The chart could not be drawn: ${message(err)}`, true));
  // Streamlit also calls the cleanup of a call whose data was overtaken by newer data while the
  // module loaded: the chart is still on the page then, and is kept. Only a removed one is purged.
  return () => {
    if (parentElement.isConnected || parentElement.__regimeDashChart !== chart) return;
    if (chart.observer) chart.observer.disconnect();
    if (window.Plotly && chart.drawn) window.Plotly.purge(chart.gd);
    parentElement.__regimeDashChart = undefined;
  };
}
