//! Charts of a benchmark's series: a horizontal ASCII bar chart for the terminal and the README, and
//! a small SVG line chart.

/// One bar per point, `width` characters for the largest value.
pub fn ascii(title: &str, points: &[(usize, f64)], width: usize) -> String {
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut out = format!("{title}\n");
    for (n, v) in points {
        let len = if max > 0.0 {
            (v / max * width as f64).round() as usize
        } else {
            0
        };
        out.push_str(&format!("N={n:<4} {:<width$} {v:.0}\n", "#".repeat(len)));
    }
    out
}

/// The series as lines over N, each scaled to its own maximum (its value printed at each point).
pub fn svg(series: &[(&str, Vec<(usize, f64)>)]) -> String {
    let (w, h, pad) = (640.0, 320.0, 48.0);
    let max_n = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\">N (sidecars)</text>\n",
        h - pad,
        w - pad,
        h - pad,
        w / 2.0,
        h - 12.0
    );
    for (i, (title, points)) in series.iter().enumerate() {
        let colour = colours[i % colours.len()];
        let max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
        let xy = |(n, v): (usize, f64)| {
            (
                pad + n as f64 / max_n * (w - 2.0 * pad),
                h - pad - v / max * (h - 2.0 * pad),
            )
        };
        let path: Vec<String> = points
            .iter()
            .map(|p| {
                let (x, y) = xy(*p);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        out.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n\
             <text x=\"{pad}\" y=\"{}\" fill=\"{colour}\">{title}</text>\n",
            path.join(" "),
            16.0 + 16.0 * i as f64
        ));
        for p in points {
            let (x, y) = xy(*p);
            out.push_str(&format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{:.0}</text>\n",
                x + 4.0,
                y - 4.0,
                p.1
            ));
        }
        if let Some(&(n, _)) = points.last() {
            let (x, _) = xy((n, 0.0));
            out.push_str(&format!(
                "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{n}</text>\n",
                h - pad + 14.0
            ));
        }
    }
    out.push_str("</svg>\n");
    out
}
