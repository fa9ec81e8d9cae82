//! The timeline as one self-contained HTML page: the SVG inline, its legend, no external
//! reference (no network, no CDN). The dashboard's page adds a few lines of script that
//! replace the drawing when its server sends a new one.

use super::Timeline;
use super::svg::{esc, render};

/// The page's own style (the drawing carries its own).
const PAGE_STYLE: &str = "body{font-family:sans-serif;margin:16px;color:#222}\
h1{font-size:18px}table{border-collapse:collapse}\
td,th{padding:2px 12px 2px 0;text-align:left;font-family:monospace}\
a{color:#1f5fa8}#live{color:#888;font-size:12px}\
h2{font-size:15px;margin-top:18px}h3{font-size:13px;margin:10px 0 4px}.kind{color:#888;font-weight:normal}\
tr.warning td{color:#a33}pre.log-text{background:#f6f6f6;padding:6px;max-height:320px;\
overflow:auto;font-size:12px;margin:0}pre.unavailable,pre.empty{color:#888}";

/// The page for `timeline`. With `live`, the URL of a server-sent-events stream whose
/// `timeline` messages are new drawings, the page updates itself.
pub fn page(timeline: &Timeline, heading_html: &str, live: Option<&str>) -> String {
    page_with(timeline, heading_html, "", live)
}

/// [`page`] with `after_html` under the drawing (the dashboard's events and logs; a live
/// stream's `events` and `logs` messages replace the contents of its `#events` and `#logs`).
pub fn page_with(
    timeline: &Timeline,
    heading_html: &str,
    after_html: &str,
    live: Option<&str>,
) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    out.push_str(&format!(
        "<title>{} — podvisor timeline</title>",
        esc(&timeline.pod)
    ));
    out.push_str(&format!("<style>{PAGE_STYLE}</style></head><body>"));
    out.push_str(heading_html);
    out.push_str("<div id=\"timeline\">");
    out.push_str(&render(timeline));
    out.push_str("</div>");
    out.push_str(after_html);
    if let Some(url) = live {
        out.push_str(&format!(
            "<p id=\"live\" data-stream=\"{}\">live: waiting for changes</p>",
            esc(url)
        ));
        out.push_str(LIVE_SCRIPT);
    }
    out.push_str("</body></html>\n");
    out
}

/// Replaces the drawing with each `timeline` message of the page's stream; a `failure`
/// message (the pod is gone) is shown under it.
const LIVE_SCRIPT: &str = "<script>(function(){\
var p=document.getElementById('live');\
var s=new EventSource(p.dataset.stream);\
var n=0;\
s.addEventListener('timeline',function(e){\
document.getElementById('timeline').innerHTML=e.data;n++;\
p.textContent='live: '+n+' update'+(n==1?'':'s')+', last at '+new Date().toLocaleTimeString();});\
['events','logs'].forEach(function(k){s.addEventListener(k,function(e){\
var el=document.getElementById(k);if(el){el.innerHTML=e.data;}});});\
s.addEventListener('failure',function(e){p.textContent='live: '+e.data;});\
s.onerror=function(){p.textContent='live: disconnected, retrying';};\
})();</script>";
