//! Line charts as SVG files, with plotters.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// Where a chart's legend goes: over the corner its lines leave empty.
pub use plotters::chart::SeriesLabelPosition as Legend;

/// One named line of (x, y) points.
pub struct Series<'a> {
    /// Its legend.
    pub name: &'a str,
    /// Its points.
    pub points: Vec<(f64, f64)>,
}

/// Distinct colours, in series order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(0, 0, 0),
];

/// Draws `series` into an SVG file at `path`, with a logarithmic y axis when `log_y`, and the
/// legend at `legend`.
pub fn lines(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[Series<'_>],
    log_y: bool,
    legend: Legend,
) -> Result<(), String> {
    let root = SVGBackend::new(path, (820, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let area = root.titled(title, ("sans-serif", 20)).map_err(|e| e.to_string())?;
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0, f64::max);
    let y_max = points().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    if log_y {
        let y_min = points().map(|p| p.1).fold(f64::MAX, f64::min).max(1.0) * 0.8;
        chart(&area, 0.0..x_max, (y_min..y_max).log_scale(), (x_label, y_label), series, legend)?;
    } else {
        chart(&area, 0.0..x_max, 0.0..y_max, (x_label, y_label), series, legend)?;
    }
    root.present().map_err(|e| e.to_string())
}

fn chart<Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    x: std::ops::Range<f64>,
    y: Y,
    (x_label, y_label): (&str, &str),
    series: &[Series<'_>],
    legend: Legend,
) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    // Whole numbers on an axis that reaches 10 or more; one decimal on a shorter one.
    let (x_end, y_end) = (chart.x_range().end, chart.y_range().end);
    let label = |end: f64| move |v: &f64| if end >= 10.0 { format!("{v:.0}") } else { format!("{v:.1}") };
    let (x_format, y_format) = (label(x_end), label(y_end));
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .max_light_lines(2)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}
