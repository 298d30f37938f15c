//! SVG charts for reports (plotters): grouped bars, and lines, of medians with min–max
//! whiskers.

use std::path::Path;

use plotters::prelude::*;

use crate::stats::Summary;

/// One group of bars: a label and one summary per series (`None`: no data).
#[derive(Debug, Clone)]
pub struct BarGroup {
    /// Label under the group.
    pub label: String,
    /// One value per series, in series order.
    pub values: Vec<Option<Summary>>,
}

const COLORS: [RGBColor; 4] = [
    RGBColor(0x9e, 0x9e, 0x9e),
    RGBColor(0x42, 0x85, 0xf4),
    RGBColor(0xdb, 0x44, 0x37),
    RGBColor(0x0f, 0x9d, 0x58),
];

/// For more than four series: pairs of a strong and a light shade (one pair per protocol,
/// e.g. ark and its peer).
const PAIRED: [RGBColor; 8] = [
    RGBColor(0x1f, 0x5f, 0xd0),
    RGBColor(0x9c, 0xc0, 0xfa),
    RGBColor(0xc0, 0x2a, 0x1e),
    RGBColor(0xf2, 0xa5, 0x9e),
    RGBColor(0x0b, 0x7a, 0x44),
    RGBColor(0x95, 0xd5, 0xb2),
    RGBColor(0x61, 0x61, 0x61),
    RGBColor(0xc8, 0xc8, 0xc8),
];

/// Draws grouped bars on a logarithmic axis: bar height is the median, the whisker spans
/// min–max. Group labels sit in a band at the bottom of the plot.
///
/// # Errors
/// The drawing backend's error, as text.
pub fn grouped_bars_svg(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[&str],
    groups: &[BarGroup],
) -> Result<(), String> {
    let (floor, top) = decades(groups)?;
    // A band below the data for the group labels.
    let label_band = floor / 10.0;

    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(10)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..groups.len() as f64, (label_band..top).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_desc(y_label)
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()
        .map_err(|e| e.to_string())?;

    let width = 0.8 / series.len() as f64;
    let palette: &[RGBColor] = if series.len() <= COLORS.len() {
        &COLORS
    } else {
        &PAIRED
    };
    for (s, name) in series.iter().enumerate() {
        let color = palette[s % palette.len()];
        let bars = groups.iter().enumerate().filter_map(|(g, group)| {
            let v = group.values.get(s).copied().flatten()?;
            let x0 = g as f64 + 0.1 + s as f64 * width;
            Some(Rectangle::new(
                [(x0, floor), (x0 + width * 0.9, v.median)],
                color.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        let whiskers = groups.iter().enumerate().filter_map(|(g, group)| {
            let v = group.values.get(s).copied().flatten()?;
            let x = g as f64 + 0.1 + s as f64 * width + width * 0.45;
            Some(PathElement::new(
                vec![(x, v.min), (x, v.max)],
                BLACK.stroke_width(2),
            ))
        });
        chart.draw_series(whiskers).map_err(|e| e.to_string())?;
    }
    chart
        .draw_series(group_labels(groups, label_band * 3.0))
        .map_err(|e| e.to_string())?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// The whole decades around every min and max of `groups`: (floor, top).
///
/// # Errors
/// No positive value to chart.
fn decades(groups: &[BarGroup]) -> Result<(f64, f64), String> {
    let values = groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .flat_map(|s| [s.min, s.max]);
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || lo <= 0.0 {
        return Err("no positive values to chart".to_string());
    }
    let top = 10f64.powf(hi.log10().ceil());
    let floor = 10f64.powf(lo.log10().floor());
    Ok((floor, top))
}

/// Each group's label, centred under its bars at height `y`.
fn group_labels(
    groups: &[BarGroup],
    y: f64,
) -> impl Iterator<Item = Text<'static, (f64, f64), String>> + '_ {
    groups.iter().enumerate().map(move |(g, group)| {
        Text::new(
            group.label.clone(),
            (g as f64 + 0.5, y),
            ("sans-serif", 13).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Center,
                ),
            ),
        )
    })
}

/// Line colours, one per series (cycled past eight).
const LINES: [RGBColor; 8] = [
    RGBColor(0x1f, 0x5f, 0xd0),
    RGBColor(0x0b, 0x7a, 0x44),
    RGBColor(0xe3, 0x8b, 0x00),
    RGBColor(0xc0, 0x2a, 0x1e),
    RGBColor(0x7b, 0x3f, 0xb0),
    RGBColor(0x61, 0x61, 0x61),
    RGBColor(0x00, 0x8b, 0x8b),
    RGBColor(0x8b, 0x5a, 0x2b),
];

/// Draws one line per series over evenly spaced x positions, one per `points` entry (its
/// label under the axis, its values one per series, as for bars): a dot at each median with
/// a min–max whisker, a line through consecutive points that have data (a point without
/// breaks the line). The y axis is logarithmic when `log`, else linear from 0.
///
/// # Errors
/// No positive value to chart, or the drawing backend's error, as text.
pub fn lines_svg(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[&str],
    points: &[BarGroup],
    log: bool,
) -> Result<(), String> {
    let (lo, hi) = points
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .flat_map(|s| [s.min, s.max])
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() || hi <= 0.0 || (log && lo <= 0.0) {
        return Err("no positive values to chart".to_string());
    }
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let x = -0.5..points.len() as f64 - 0.5;
    let labels = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-9 && i >= 0.0 {
            points
                .get(i as usize)
                .map_or(String::new(), |p| p.label.clone())
        } else {
            String::new()
        }
    };
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(90);
    if log {
        let range = (10f64.powf(lo.log10().floor())..10f64.powf(hi.log10().ceil())).log_scale();
        let mut chart = builder
            .build_cartesian_2d(x, range)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(points.len())
            .x_label_formatter(&labels)
            .x_desc(x_label)
            .y_desc(y_label)
            .y_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(|e| e.to_string())?;
        draw_lines(&mut chart, series, points)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x, 0.0..hi * 1.1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(points.len())
            .x_label_formatter(&labels)
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        draw_lines(&mut chart, series, points)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// The series of [`lines_svg`] on `chart`, with their legend.
fn draw_lines<'a, Y>(
    chart: &mut ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    series: &[&str],
    points: &[BarGroup],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    for (s, name) in series.iter().enumerate() {
        let color = LINES[s % LINES.len()];
        let value = |g: usize| points[g].values.get(s).copied().flatten();
        // Runs of consecutive points with data, each its own line.
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for g in 0..points.len() {
            match value(g) {
                Some(v) => segments.last_mut().expect("one").push((g as f64, v.median)),
                None => segments.push(Vec::new()),
            }
        }
        let mut first = true;
        for segment in segments.into_iter().filter(|s| !s.is_empty()) {
            let drawn = chart
                .draw_series(LineSeries::new(segment, color.stroke_width(2)))
                .map_err(|e| e.to_string())?;
            if std::mem::take(&mut first) {
                drawn.label(*name).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
        }
        let marks = (0..points.len()).filter_map(|g| {
            let v = value(g)?;
            Some(Circle::new((g as f64, v.median), 4, color.filled()))
        });
        chart.draw_series(marks).map_err(|e| e.to_string())?;
        let whiskers = (0..points.len()).filter_map(|g| {
            let v = value(g)?;
            let x = g as f64 + (s as f64 - series.len() as f64 / 2.0) * 0.01;
            Some(PathElement::new(
                vec![(x, v.min), (x, v.max)],
                color.stroke_width(1),
            ))
        });
        chart.draw_series(whiskers).map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}
