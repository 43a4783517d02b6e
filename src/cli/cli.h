/* The vramtap command: one function per subcommand, each taking the arguments after its name
 * (argv[0] is the subcommand) and returning the process exit status: 0 success, 1 the command
 * ran but found a failed check, 2 bad usage or bad input (one line on stderr). */
#ifndef VT_CLI_H
#define VT_CLI_H

int vt_cmd_run(int argc, char **argv);
int vt_cmd_lib(int argc, char **argv);
int vt_cmd_report(int argc, char **argv);
int vt_cmd_diff(int argc, char **argv);
int vt_cmd_import(int argc, char **argv);
int vt_cmd_view(int argc, char **argv);
int vt_cmd_export(int argc, char **argv);
int vt_cmd_fit(int argc, char **argv);

#endif
