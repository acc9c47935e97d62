"""Rust source as the repository's check scripts read it: a text scan, not a parser."""
import re


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping line numbers and brace structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            end = text.find("\n", i)
            end = n if end < 0 else end
            i = end
            continue
        if two == "/*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', text[i:i + 40])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        char = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
        if char:
            out.append("' '")
            i += char.end()
            continue
        out.append(text[i])
        i += 1
    return "".join(out)
