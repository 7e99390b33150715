// The frame of dtrain's self-contained HTML pages (a run's report, a scaling study): the document
// with its inline style sheet, sections, tables and notes, numbers as text, and the step phases'
// order and colours that their charts share. No script, no font or file from elsewhere.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// A whole page: `header` and `body` are HTML already (their text escaped by whoever made them).
std::string html_document(const std::string& title, const std::string& header, const std::string& body);
// <section id="…"><h2>title</h2>content</section>; `content` is HTML.
std::string html_section(const std::string& id, const std::string& title, const std::string& content);
// A paragraph of plain text (escaped) in the muted style of remarks.
std::string html_note(const std::string& text);
// A table of plain-text cells (escaped); cells past the first that read as numbers are right-aligned
// (with numbers_right). `caption` (plain text, may be "") goes above it.
std::string html_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       const std::string& caption = "", bool numbers_right = true);
// Charts side by side, wrapping (`charts`: SVG elements).
std::string html_charts(const std::vector<std::string>& charts);

// v with `decimals` decimals and thousands separated by commas ("41,500.0"); "–" when v is NaN
// or infinite.
std::string format_number(double v, int decimals);

// The step phases in the order docs/watching.md lists them, and each one's colour (a phase not
// listed gets the palette's colour for `index`).
const std::vector<std::string>& phase_names();
std::string phase_color(const std::string& phase, size_t index);

}  // namespace dtrain
