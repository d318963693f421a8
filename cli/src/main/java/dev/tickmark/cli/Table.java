package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * An aligned plain-text table, like {@code docker ps}: a header row, then one row per item, columns
 * two spaces apart. Missing values print as {@code -}; a column of numbers (and dashes) is
 * right-aligned.
 */
final class Table {
  private static final Pattern NUMBER = Pattern.compile("-?\\d+(\\.\\d+)?");
  private final List<String> header;
  private final List<List<String>> rows = new ArrayList<>();

  Table(String... header) {
    this.header = List.of(header);
  }

  Table row(Object... cells) {
    if (cells.length != header.size())
      throw new IllegalArgumentException("a row needs " + header.size() + " cells");
    List<String> row = new ArrayList<>(cells.length);
    for (Object cell : cells) row.add(cell(cell));
    rows.add(row);
    return this;
  }

  boolean isEmpty() {
    return rows.isEmpty();
  }

  void print(PrintWriter out) {
    int columns = header.size();
    int[] width = new int[columns];
    boolean[] numeric = new boolean[columns];
    for (int c = 0; c < columns; c++) {
      width[c] = header.get(c).length();
      boolean anyNumber = false;
      boolean onlyNumbers = true;
      for (List<String> row : rows) {
        String cell = row.get(c);
        width[c] = Math.max(width[c], cell.length());
        if (NUMBER.matcher(cell).matches()) anyNumber = true;
        else if (!cell.equals("-")) onlyNumbers = false;
      }
      numeric[c] = anyNumber && onlyNumbers;
    }
    line(out, header, width, numeric);
    for (List<String> row : rows) line(out, row, width, numeric);
    out.flush();
  }

  private static void line(PrintWriter out, List<String> cells, int[] width, boolean[] numeric) {
    StringBuilder line = new StringBuilder();
    for (int c = 0; c < cells.size(); c++) {
      String cell = cells.get(c);
      boolean lastColumn = c == cells.size() - 1;
      String pad = " ".repeat(width[c] - cell.length());
      if (numeric[c]) line.append(pad).append(cell);
      else line.append(cell).append(lastColumn ? "" : pad);
      if (!lastColumn) line.append("  ");
    }
    out.println(line.toString().stripTrailing());
  }

  /** A JSON value as a cell: text as is, null or missing as {@code -}. */
  static String cell(Object value) {
    if (value == null) return "-";
    if (value instanceof JsonNode node)
      return node.isNull() || node.isMissingNode() ? "-" : node.asText();
    String text = value.toString();
    return text.isEmpty() ? "-" : text;
  }

  /** Label/value pairs, labels aligned: one resource shown in full. */
  static final class Details {
    private final List<String[]> pairs = new ArrayList<>();

    Details add(String label, Object value) {
      pairs.add(new String[] {label, cell(value)});
      return this;
    }

    void print(PrintWriter out) {
      int width = pairs.stream().mapToInt(p -> p[0].length()).max().orElse(0);
      for (String[] p : pairs)
        out.println(p[0] + ":" + " ".repeat(width - p[0].length() + 2) + p[1]);
      out.flush();
    }
  }
}
