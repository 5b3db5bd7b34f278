/* The subcommands of `folio`; each returns the process exit status. */
#ifndef FOLIO_COMMANDS_H
#define FOLIO_COMMANDS_H

int folio_generate_main(int argc, char **argv);
int folio_tokenize_main(int argc, char **argv);
int folio_serve_main(int argc, char **argv);
int folio_chat_main(int argc, char **argv);

#endif
