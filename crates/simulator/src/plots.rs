//! The report's plots, drawn with `plotters` into SVG strings (its SVG backend only: no
//! fonts, no bitmaps; text is left to the browser). plotters gives the axes, tick labels,
//! legends and dashed series that the hand-built SVG before it had to get right by hand.
//!
//! What a reader needs to see, and how each plot makes it readable:
//! - strategies that overlap (cost-aware and cost-aware+opt often coincide) get colours far
//!   apart, a dash pattern of their own and markers, so two lines on top of each other still
//!   show as two;
//! - pending pods are spiky and differ by orders of magnitude between strategies (2,000 pods
//!   waiting for a CAS scan next to a few for Karpenter), so each strategy gets its own panel
//!   with its own y scale instead of one crowded chart;
//! - sampled state holds until the next sample, so series are drawn as steps.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Result, SimError};

/// One series of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub style: LineStyle,
    pub points: Vec<(f64, f64)>,
}

/// How a series is drawn: colour, dash, markers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineStyle {
    pub rgb: (u8, u8, u8),
    /// Dash length and gap in pixels; `None` is a solid line.
    pub dash: Option<(u32, u32)>,
    /// Draw a small marker every so often along the line.
    pub markers: bool,
    pub width: u32,
}

impl LineStyle {
    fn color(&self) -> RGBColor {
        RGBColor(self.rgb.0, self.rgb.1, self.rgb.2)
    }

    /// CSS colour, for the HTML table's swatches.
    pub fn css(&self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.rgb.0, self.rgb.1, self.rgb.2)
    }
}

/// A strategy's style. The two cost-aware variants are far apart in hue and dash, since
/// they are the pair most often on top of each other.
pub fn strategy_style(name: &str) -> LineStyle {
    let (rgb, dash, markers) = match name {
        "cost-aware" => ((31, 119, 180), None, false),
        "cost-aware+opt" => ((255, 127, 14), Some((8, 5)), true),
        "karpenter" => ((214, 39, 40), None, false),
        "cas" => ((44, 160, 44), Some((3, 3)), false),
        "cost-aware-legacy" => ((148, 103, 189), Some((12, 4)), false),
        "cost-aware-weighted" => ((140, 86, 75), Some((2, 4)), true),
        _ => ((127, 127, 127), Some((6, 3)), false),
    };
    LineStyle {
        rgb,
        dash,
        markers,
        width: 2,
    }
}

/// The reference lines (lower bound, per-resource part).
pub fn reference_style(dark: bool) -> LineStyle {
    LineStyle {
        rgb: if dark { (20, 20, 20) } else { (160, 160, 160) },
        dash: Some((4, 4)),
        markers: false,
        width: 1,
    }
}

fn err(e: impl std::fmt::Display) -> SimError {
    SimError::Report(format!("plot: {e}"))
}

/// Sampled state as steps: each value holds until the next sample.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// Axis ranges over every line; never empty, so plotters always has a scale.
fn ranges(lines: &[Line]) -> ((f64, f64), f64) {
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in lines.iter().flat_map(|l| l.points.iter().copied()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    let xr = if x0.is_finite() && x1 > x0 {
        (x0, x1)
    } else {
        (0.0, 1.0)
    };
    let yr = if y1 > 0.0 && y1.is_finite() {
        y1 * 1.08
    } else {
        1.0
    };
    (xr, yr)
}

/// Draws `lines` into an area: axes, grid, the series and a legend.
fn draw_lines(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    legend: bool,
) -> Result<()> {
    let ((x0, x1), y1) = ranges(lines);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(58)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    // Markers roughly every 1/25 of the samples: enough to tell a line apart, few enough
    // not to hide its shape.
    for l in lines {
        let st = l.style;
        let color = st.color();
        let shape = color.stroke_width(st.width);
        let pts = steps(&l.points);
        let anno = match st.dash {
            None => chart
                .draw_series(LineSeries::new(pts, shape))
                .map_err(err)?,
            Some((size, gap)) => chart
                .draw_series(DashedLineSeries::new(pts, size, gap, shape))
                .map_err(err)?,
        };
        let legend_style = shape;
        anno.label(l.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], legend_style));
        if st.markers && !l.points.is_empty() {
            let every = (l.points.len() / 25).max(1);
            chart
                .draw_series(
                    l.points
                        .iter()
                        .step_by(every)
                        .map(|&(x, y)| TriangleMarker::new((x, y), 4, color.filled())),
                )
                .map_err(err)?;
        }
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// A line chart as a standalone SVG document.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, lines: &[Line]) -> Result<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (960, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw_lines(&root, title, x_label, y_label, lines, true)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// One panel per line, each with its own y scale (for series whose sizes differ by orders
/// of magnitude, like pending pods across strategies).
pub fn small_multiples(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> Result<String> {
    let panel_h = 170u32;
    let mut buf = String::new();
    {
        let n = lines.len().max(1);
        let root =
            SVGBackend::with_string(&mut buf, (960, 40 + panel_h * n as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, ("sans-serif", 17)).map_err(err)?;
        let panels = root.split_evenly((n, 1));
        for (area, l) in panels.iter().zip(lines) {
            let max = l.points.iter().map(|p| p.1).fold(0.0f64, f64::max);
            let sub = format!("{} (max {max:.0})", l.name);
            // Alone in its panel, a line needs no dash or markers to be told apart.
            let mut solid = l.clone();
            solid.style.dash = None;
            solid.style.markers = false;
            draw_lines(area, &sub, x_label, y_label, &[solid], false)?;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, pts: &[(f64, f64)]) -> Line {
        Line {
            name: name.into(),
            style: strategy_style(name),
            points: pts.to_vec(),
        }
    }

    #[test]
    fn chart_is_svg_with_axes_and_legend() -> Result<()> {
        let a = line("cost-aware", &[(0.0, 1.0), (1.0, 2.0), (2.0, 0.5)]);
        let b = line("a<b", &[(0.0, 1.0), (2.0, 1.0)]);
        let svg = line_chart("t", "time", "dollars", &[a, b])?;
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.trim_end().ends_with("</svg>"));
        // Legend entries (escaped) and axis descriptions are text in the document.
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains("cost-aware"));
        assert!(svg.contains("dollars"));
        Ok(())
    }

    #[test]
    fn empty_and_flat_lines_still_plot() -> Result<()> {
        let svg = line_chart("empty", "x", "y", &[])?;
        assert!(svg.contains("empty"));
        let flat = line("karpenter", &[(5.0, 0.0)]);
        assert!(small_multiples("p", "x", "y", &[flat])?.contains("karpenter (max 0)"));
        Ok(())
    }

    #[test]
    fn overlapping_strategies_are_drawn_differently() {
        let a = strategy_style("cost-aware");
        let b = strategy_style("cost-aware+opt");
        assert_ne!(a.rgb, b.rgb);
        assert_ne!(a.dash, b.dash);
        // Far apart in colour, not two blues.
        let d: i32 = [(a.rgb.0, b.rgb.0), (a.rgb.1, b.rgb.1), (a.rgb.2, b.rgb.2)]
            .iter()
            .map(|&(x, y)| (x as i32 - y as i32).abs())
            .sum();
        assert!(d > 200, "colour distance {d}");
    }

    #[test]
    fn steps_hold_values() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 3.0)]),
            vec![(0.0, 1.0), (2.0, 1.0), (2.0, 3.0)]
        );
    }
}
