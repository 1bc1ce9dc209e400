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
    let Axes { x_max, y_min, y_max } = axes(series, log_y);
    if log_y {
        chart(&area, 0.0..x_max, (y_min..y_max).log_scale(), (x_label, y_label), series, legend)?;
    } else {
        chart(&area, 0.0..x_max, y_min..y_max, (x_label, y_label), series, legend)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// A chart's axes' ends.
#[derive(Debug, PartialEq)]
struct Axes {
    /// The x axis runs from 0 to here.
    x_max: f64,
    /// The y axis runs from here ...
    y_min: f64,
    /// ... to here.
    y_max: f64,
}

/// The axes that show every point of `series`: x from 0 to the largest x, y from 0 (from 0.8 of the
/// smallest y on a logarithmic axis) to 1.1 times the largest, with room above the highest line
/// for a legend. Each axis reaches 1 at least, and a logarithmic one starts at 0.8 at least.
fn axes(series: &[Series<'_>], log_y: bool) -> Axes {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0, f64::max);
    let y_max = points().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let y_min =
        if log_y { points().map(|p| p.1).reduce(f64::min).unwrap_or(1.0).max(1.0) * 0.8 } else { 0.0 };
    Axes { x_max, y_min, y_max }
}

/// An axis's tick label for `v`: a whole number on an axis that ends at 10 or more, one decimal on
/// a shorter one.
fn tick(end: f64, v: f64) -> String {
    if end >= 10.0 { format!("{v:.0}") } else { format!("{v:.1}") }
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
    let (x_end, y_end) = (chart.x_range().end, chart.y_range().end);
    let (x_format, y_format) = (|v: &f64| tick(x_end, *v), |v: &f64| tick(y_end, *v));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn series<'a>(name: &'a str, points: &[(f64, f64)]) -> Series<'a> {
        Series { name, points: points.to_vec() }
    }

    #[test]
    fn the_axes_reach_every_point_with_room_above_the_highest() {
        let two = [series("a", &[(0.0, 4.0), (30.0, 50.0)]), series("b", &[(10.0, 2.5), (20.0, 100.0)])];
        assert_eq!(axes(&two, false), Axes { x_max: 30.0, y_min: 0.0, y_max: 110.00000000000001 });
        assert_eq!(axes(&two, true), Axes { x_max: 30.0, y_min: 2.0, y_max: 110.00000000000001 });
        // Points all below 1 (or none): each axis still reaches 1, and a logarithmic one starts at
        // 0.8 (with no points too: not above its end).
        let small = [series("c", &[(0.5, 0.25), (0.75, 0.5)])];
        assert_eq!(axes(&small, false), Axes { x_max: 1.0, y_min: 0.0, y_max: 1.1 });
        assert_eq!(axes(&small, true), Axes { x_max: 1.0, y_min: 0.8, y_max: 1.1 });
        assert_eq!(axes(&[], true), Axes { x_max: 1.0, y_min: 0.8, y_max: 1.1 });
    }

    #[test]
    fn ticks_are_whole_numbers_on_an_axis_to_10_or_more_and_one_decimal_below() {
        assert_eq!(
            [tick(10.0, 2.5), tick(9.99, 2.5), tick(9.99, 2.25), tick(110.0, 40.0)],
            ["2", "2.5", "2.2", "40"]
        );
    }

    /// The SVG's texts, in the order drawn.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .map(|t| t.split('>').nth(1).unwrap().split('<').next().unwrap().trim())
            .collect()
    }

    /// The `stroke` colour and the number of points of each polyline drawn 2 pixels wide (the
    /// series' lines and their legend marks; the axes are 1 pixel wide).
    fn wide_lines(svg: &str) -> Vec<(&str, usize)> {
        svg.split("<polyline")
            .skip(1)
            .filter(|p| p.contains(r#"stroke-width="2""#))
            .map(|p| {
                let stroke = p.split(r#"stroke=""#).nth(1).unwrap().split('"').next().unwrap();
                let points = p.split(r#"points=""#).nth(1).unwrap().split('"').next().unwrap();
                (stroke, points.split_whitespace().count())
            })
            .collect()
    }

    /// The SVG `lines` draws for these arguments, from a file of its own (`name`) that is then removed.
    fn render(
        name: &str,
        title: &str,
        axes: (&str, &str),
        series: &[Series<'_>],
        log_y: bool,
        legend: Legend,
    ) -> String {
        let path = std::env::temp_dir().join(format!("relent-plot-{name}-{}.svg", std::process::id()));
        lines(&path, title, axes, series, log_y, legend).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        svg
    }

    #[test]
    fn a_chart_draws_its_title_axes_and_each_series_in_its_colour_with_its_legend() {
        let lines_drawn = [
            series("first", &[(0.0, 10.0), (10.0, 50.0), (20.0, 90.0)]),
            series("second", &[(0.0, 20.0), (20.0, 40.0)]),
        ];
        let svg = render("linear", "A title", ("clients", "calls"), &lines_drawn, false, Legend::UpperLeft);
        assert!(svg.starts_with(r#"<svg width="820" height="480""#));
        let texts = texts(&svg);
        assert_eq!(texts[..3], ["A title", "calls", "clients"]);
        assert_eq!(texts[texts.len() - 2..], ["first", "second"], "the legend, in series order");
        // The ticks between: y to 99 then x to 20, whole numbers on both.
        let ticks = &texts[3..texts.len() - 2];
        assert_eq!(ticks.first(), Some(&"0"));
        assert!(ticks.contains(&"90") && ticks.contains(&"20"), "{ticks:?}");
        assert!(ticks.iter().all(|t| t.parse::<u32>().is_ok()), "{ticks:?}");
        // Each series' line (its points), then the legend's marks (2 points each), in the series'
        // colours.
        assert_eq!(wide_lines(&svg), [("#D62728", 3), ("#2CA02C", 2), ("#D62728", 2), ("#2CA02C", 2)]);
    }

    #[test]
    fn a_short_axis_has_one_decimal_and_a_logarithmic_one_spans_the_points() {
        let amplification = [series("ratio", &[(0.0, 1.0), (5.0, 3.0)])];
        let svg = render("log", "Amplification", ("s", "x"), &amplification, true, Legend::UpperRight);
        let texts = texts(&svg);
        let ticks = &texts[3..texts.len() - 1];
        // x to 5: one decimal; y from 0.8 to 3.3 on a logarithmic scale: one decimal too.
        assert!(ticks.iter().all(|t| t.split_once('.').is_some_and(|(_, d)| d.len() == 1)), "{ticks:?}");
        assert!(ticks.contains(&"5.0") && ticks.contains(&"1.0") && ticks.contains(&"3.0"), "{ticks:?}");
        assert_eq!(texts.last(), Some(&"ratio"));
    }
}
