/* A small lexer over generated text: a switch in a loop (a state machine), nested loops for
 * identifiers and numbers, and a callee per token. Runs of letters, digits and blanks give
 * multi-iteration patterns; the switch exercises Ball-Larus numbering with many successors.
 *
 * usage: lexer [bytes passes]   (default 2000000 4) */
#include <stdio.h>
#include <stdlib.h>

enum { IDENT, NUMBER, PUNCT, SPACE, NKINDS };

static unsigned long counts[NKINDS];

static int classify(int c) {
  switch (c) {
    case ' ': case '\t': case '\n': return SPACE;
    case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
      return NUMBER;
    case '(': case ')': case ';': case ',': case '+': case '=': case '*': return PUNCT;
    default: return IDENT;
  }
}

static void token(int kind, long len) { counts[kind] += (unsigned long)len; }

static void lex(const char *s, long n) {
  long i = 0;
  while (i < n) {
    int kind = classify(s[i]);
    long start = i;
    switch (kind) {
      case IDENT:
        while (i < n && (classify(s[i]) == IDENT || classify(s[i]) == NUMBER)) i++;
        break;
      case NUMBER:
        while (i < n && classify(s[i]) == NUMBER) i++;
        break;
      case SPACE:
        while (i < n && classify(s[i]) == SPACE) i++;
        break;
      default:
        i++;
    }
    token(kind, i - start);
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int passes = argc > 2 ? atoi(argv[2]) : 4;
  char *text = malloc(n + 1);
  if (!text) return 1;
  static const char *words[] = {"int ", "x1 = ", "foo(", "bar, ", "42", "); ", "while ", "y * 3 ", "+ 7;\n", "\t"};
  unsigned seed = 7;
  for (long i = 0; i < n;) {
    seed = seed * 1103515245u + 12345u;
    for (const char *w = words[(seed >> 16) % 10]; *w && i < n; w++) text[i++] = *w;
  }
  text[n] = 0;
  for (int p = 0; p < passes; p++) lex(text, n);
  printf("lexer %ld x%d: ident %lu number %lu punct %lu space %lu\n", n, passes, counts[IDENT], counts[NUMBER],
         counts[PUNCT], counts[SPACE]);
  free(text);
  return 0;
}
