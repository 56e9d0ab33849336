//! The safety-against-cost chart: one mark per protocol row, x its uncontended acquire
//! latency (median, log scale), y the share of runs with damage under the reference profile
//! with its 95% interval as a whisker; a hollow ring marks the latent share where there is
//! one. Colour says what guards the resource.

use crate::stats::{pct, Share};
use crate::timeline::{escape, Labels};
use crate::Comparison;
use std::fmt::Write;

/// The drawing's frame: size, margins, and the scales.
pub struct Frame {
    w: f64,
    h: f64,
    l: f64,
    r: f64,
    t: f64,
    b: f64,
    /// The latency range drawn, in ms (log scale).
    ms: (f64, f64),
    /// The highest share drawn.
    pub top: f64,
}

impl Frame {
    /// Where a latency of `ms` is drawn, across.
    pub fn x(&self, ms: f64) -> f64 {
        let (lo, hi) = (self.ms.0.log10(), self.ms.1.log10());
        self.l + (ms.max(self.ms.0).log10() - lo) / (hi - lo) * (self.w - self.l - self.r)
    }

    /// Where a share is drawn, down.
    pub fn y(&self, share: f64) -> f64 {
        self.t + (1.0 - share / self.top) * (self.h - self.t - self.b)
    }
}

/// One row's mark: label, median ms, damage, latent, guard.
pub type Mark = (String, f64, Share, Share, String);

/// The rows' marks under `profile`: those with a measured cost and a cell there.
pub fn marks(c: &Comparison, profile: &str) -> Vec<Mark> {
    c.rows
        .iter()
        .filter_map(|r| {
            let cost = r.cost.as_ref().filter(|x| x.measured())?;
            let cell = c.cell(&r.label, profile)?;
            let guard = r.setup.guard.clone();
            Some((
                r.label.clone(),
                cost.acquire_ms_p50,
                cell.damage,
                cell.latent,
                guard,
            ))
        })
        .collect()
}

fn colour(guard: &str) -> &'static str {
    match guard {
        "fencing" => "#2a9d8f",
        "cas" => "#264653",
        _ => "#c1121f",
    }
}

/// The frame that holds `marks`: the latency range and a share scale that reach them.
pub fn frame(marks: &[Mark]) -> Frame {
    let lo = marks.iter().map(|m| m.1).fold(f64::INFINITY, f64::min);
    let hi = marks.iter().map(|m| m.1).fold(0.0, f64::max);
    let worst = marks.iter().map(|m| m.2.hi.max(m.3.hi)).fold(0.0, f64::max);
    let top = [0.1, 0.25, 0.5, 1.0]
        .into_iter()
        .find(|t| worst <= *t)
        .unwrap_or(1.0);
    Frame {
        w: 800.0,
        h: 380.0,
        l: 56.0,
        r: 20.0,
        t: 16.0,
        b: 40.0,
        ms: ((lo / 1.5).max(0.1), (hi * 1.5).max(lo * 3.0)),
        top,
    }
}

fn grid(s: &mut String, labels: &mut Labels, f: &Frame) {
    // Steps that give round percentages at every scale.
    let step = match f.top {
        t if t <= 0.1 => 0.02,
        t if t <= 0.25 => 0.05,
        t if t <= 0.5 => 0.1,
        _ => 0.25,
    };
    let ticks = (f.top / step).round() as usize;
    for k in 0..=ticks {
        let share = step * k as f64;
        let y = f.y(share);
        let _ = write!(
            s,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/>"##,
            f.l,
            f.w - f.r
        );
        labels.place(&pct(share), &[(f.l - 6.0, y + 4.0)], "end", 10.0, "#666");
    }
    for ms in [
        0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
    ] {
        if ms < f.ms.0 || ms > f.ms.1 {
            continue;
        }
        let x = f.x(ms);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/>"##,
            f.t,
            f.h - f.b
        );
        let text = format!("{ms} ms");
        labels.place(&text, &[(x, f.h - f.b + 14.0)], "middle", 10.0, "#666");
    }
    let axis = "uncontended acquire, median (log scale)";
    labels.place(axis, &[(f.w - f.r, f.h - 4.0)], "end", 10.0, "#444");
}

/// The chart, for the cells of `profile`.
pub fn svg(c: &Comparison, profile: &str) -> String {
    let marks = marks(c, profile);
    let f = frame(&marks);
    let mut labels = Labels::new(f.w, f.h);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="tradeoff" viewBox="0 0 {0} {1}" width="{0}" height="{1}" font-family="sans-serif" font-size="11">"#,
        f.w, f.h
    );
    grid(&mut s, &mut labels, &f);
    let mut drawn: Vec<f64> = vec![];
    for (label, ms, damage, latent, guard) in &marks {
        // Rows of the same latency (the same protocol, another guard) stand side by side.
        let same = drawn.iter().filter(|d| (*d - ms).abs() < 0.05).count();
        drawn.push(*ms);
        let (x, y) = (f.x(*ms) + 9.0 * same as f64, f.y(damage.rate()));
        let tip = format!("{label}: {ms:.1} ms; damage {}", damage.text());
        let _ = write!(
            s,
            r##"<path d="M{x:.1},{:.1} V{:.1}" stroke="#333"/><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="{}"><title>{}</title></circle>"##,
            f.y(damage.lo),
            f.y(damage.hi),
            colour(guard),
            escape(&tip)
        );
        if latent.k > 0 {
            let tip = format!("{label}: latent {}", latent.text());
            let _ = write!(
                s,
                r##"<circle cx="{x:.1}" cy="{:.1}" r="6" fill="none" stroke="#7b2cbf" stroke-width="1.5"><title>{}</title></circle>"##,
                f.y(latent.rate()),
                escape(&tip)
            );
        }
        let spots = [
            (x + 8.0, y + 4.0),
            (x - 8.0, y - 8.0),
            (x + 8.0, y - 8.0),
            (x + 8.0, y + 16.0),
            (x - 8.0, y + 16.0),
            (x + 8.0, y - 20.0),
            (x + 8.0, y + 28.0),
        ];
        if !labels.place(label, &spots, "start", 11.0, "#222") {
            let left: Vec<(f64, f64)> = spots.iter().map(|(_, sy)| (x - 8.0, *sy)).collect();
            labels.place(label, &left, "end", 11.0, "#222");
        }
        if latent.k > 0 {
            // The ring says what it is and whose it is: its row's mark is straight below or
            // above it, and the legend alone would leave a reader to guess.
            let ring = format!("latent {} ({label})", pct(latent.rate()));
            let (rx, ry) = (x, f.y(latent.rate()));
            let at = [4.0, -8.0, 16.0, -20.0, 28.0].map(|dy| (rx + 9.0, ry + dy));
            if !labels.place(&ring, &at, "start", 10.0, "#7b2cbf") {
                let left: Vec<(f64, f64)> = at.iter().map(|(_, sy)| (rx - 9.0, *sy)).collect();
                labels.place(&ring, &left, "end", 10.0, "#7b2cbf");
            }
        }
    }
    s.push_str(&labels.finish());
    s.push_str("</svg>");
    s
}

/// The legend under the chart.
pub fn legend(profile: &str) -> String {
    format!(
        "One mark per row: x its uncontended acquire median (ms, log scale), y its share of runs \
         with damage under {profile} (whisker: 95% interval); hollow purple ring: its latent \
         share, labelled with its row; colour: red no guard, teal fencing, dark blue compare-and-set; rows of equal \
         latency stand side by side."
    )
}
