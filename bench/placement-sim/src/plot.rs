//! SVG line charts for the placement report (plotters, SVG backend, rendered to a string so the
//! caller decides where it goes and tests can compare bytes).

use plotters::prelude::*;

/// Why a chart could not be drawn (plotters' error, with its own text).
pub type PlotError = DrawingAreaErrorKind<std::io::Error>;

/// One named series of (x, y) points.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// Points.
    pub points: Vec<(f64, f64)>,
}

/// Renders `series` as a line chart; `log_y` uses a logarithmic y axis (values ≤ 0 are lifted to
/// the axis floor).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
    log_y: bool,
) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let x_max = xs.fold(1.0f64, f64::max);
        let ys: Vec<f64> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .collect();
        let y_max = ys.iter().copied().fold(1.0f64, f64::max) * 1.1;
        let y_floor = ys
            .iter()
            .copied()
            .filter(|y| *y > 0.0)
            .fold(f64::MAX, f64::min)
            .min(y_max);
        let y_floor = if y_floor == f64::MAX {
            1.0
        } else {
            y_floor * 0.8
        };
        let palette = [
            RGBColor(31, 119, 180),
            RGBColor(255, 127, 14),
            RGBColor(44, 160, 44),
            RGBColor(214, 39, 40),
            RGBColor(148, 103, 189),
            RGBColor(140, 86, 75),
            RGBColor(227, 119, 194),
            RGBColor(127, 127, 127),
        ];
        let mut builder = ChartBuilder::on(&root);
        let _ = builder
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70);
        macro_rules! draw {
            ($chart:expr, $map_y:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_label)
                    .y_desc(y_label)
                    .draw()?;
                for (i, s) in series.iter().enumerate() {
                    let color = palette[i % palette.len()];
                    let map_y = $map_y;
                    chart
                        .draw_series(LineSeries::new(
                            s.points.iter().map(|&(x, y)| (x, map_y(y))),
                            color.stroke_width(2),
                        ))?
                        .label(s.label)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                        });
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperRight)
                    .draw()?;
            }};
        }
        if log_y {
            let chart = builder.build_cartesian_2d(0.0..x_max, (y_floor..y_max).log_scale())?;
            draw!(chart, move |y: f64| y.max(y_floor));
        } else {
            let chart = builder.build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
            draw!(chart, |y: f64| y);
        }
        root.present()?;
    }
    Ok(svg)
}
