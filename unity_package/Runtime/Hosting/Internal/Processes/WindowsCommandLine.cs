using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>
    /// The command line CreateProcessW gets. Windows passes a program one string, which the program splits itself: the
    /// C runtime and CommandLineToArgvW split at spaces and tabs outside quotes; 2n backslashes before a quote are n
    /// backslashes and the quote delimits, 2n+1 are n and a literal quote; other backslashes are literal; inside quotes
    /// `""` is a literal quote. The program's own name (argv[0]) is read differently, up to the next quote with no
    /// escapes, which is fine: a Windows path cannot hold a quote. A batch file (.cmd, .bat) is run by cmd.exe, which
    /// reads the line once more with its own rules (see <see cref="ForBatch"/>).
    /// </summary>
    internal static class WindowsCommandLine
    {
        /// <summary>`exe` and `args` as one line: `"exe" arg1 "arg 2" …`, each argument quoted only where it must be.</summary>
        public static string ForProgram(string exe, IList<string> args)
        {
            CheckPath(exe);
            StringBuilder line = new StringBuilder();
            line.Append('"').Append(exe).Append('"');
            foreach (string arg in args)
            {
                line.Append(' ');
                AppendArgument(line, arg ?? "");
            }
            return line.ToString();
        }

        /// <summary>Joins `args` (no program name) as the C runtime splits them back.</summary>
        public static string Join(IEnumerable<string> args)
        {
            StringBuilder line = new StringBuilder();
            foreach (string arg in args)
            {
                if (line.Length > 0) line.Append(' ');
                AppendArgument(line, arg ?? "");
            }
            return line.ToString();
        }

        /// <summary>
        /// True for a batch file, which CreateProcessW cannot start itself. Windows ignores trailing dots and spaces in a
        /// name, so `run.cmd. .` is one too.
        /// </summary>
        public static bool IsBatch(string path)
        {
            string name = (path ?? "").TrimEnd('.', ' ');
            return name.EndsWith(".cmd", StringComparison.OrdinalIgnoreCase) || name.EndsWith(".bat", StringComparison.OrdinalIgnoreCase);
        }

        /// <summary>
        /// The line that runs the batch file `batch` through cmd.exe: `cmd.exe /d /e:ON /v:OFF /s /c ""batch" args"`. /s
        /// makes cmd.exe strip exactly the outer pair of quotes, so a path with spaces stays one; /d skips AutoRun
        /// commands; /v:OFF keeps `!` plain; /e:ON keeps the `%` escape below working. cmd.exe leaves `&amp; | &lt; &gt; ^ ( )`
        /// alone inside quotes, so every argument that is not a plain word is quoted; a quote in it is doubled; each `%`
        /// becomes `%%cd:~,%` (an empty slice of a variable that always exists), so no `%NAME%` can expand; a line break
        /// cannot be passed at all (cmd.exe would end the command there) and is refused with ArgumentException.
        /// </summary>
        public static string ForBatch(string cmdExe, string batch, IList<string> args)
        {
            CheckPath(batch);
            StringBuilder line = new StringBuilder();
            line.Append('"').Append(cmdExe).Append("\" /d /e:ON /v:OFF /s /c \"\"").Append(batch).Append('"');
            foreach (string arg in args)
            {
                line.Append(' ');
                AppendBatchArgument(line, arg ?? "");
            }
            line.Append('"');
            return line.ToString();
        }

        private static void CheckPath(string path)
        {
            if (string.IsNullOrEmpty(path) || path.IndexOf('"') >= 0 || path.IndexOf('\0') >= 0)
                throw new ArgumentException("not a Windows program path: '" + path + "'");
        }

        private static void AppendArgument(StringBuilder line, string arg)
        {
            if (arg.IndexOf('\0') >= 0) throw new ArgumentException("an argument cannot hold a NUL character");
            if (arg.Length > 0 && arg.IndexOfAny(new[] { ' ', '\t', '\n', '\v', '"' }) < 0)
            {
                line.Append(arg);
                return;
            }
            line.Append('"');
            int backslashes = 0;
            foreach (char c in arg)
            {
                if (c == '\\')
                {
                    backslashes++;
                    continue;
                }
                // Backslashes before a quote are doubled and the quote escaped; elsewhere they stay as they are.
                line.Append('\\', c == '"' ? backslashes * 2 + 1 : backslashes);
                backslashes = 0;
                line.Append(c);
            }
            line.Append('\\', backslashes * 2);  // before the closing quote
            line.Append('"');
        }

        private static void AppendBatchArgument(StringBuilder line, string arg)
        {
            if (arg.IndexOfAny(new[] { '\r', '\n', '\0' }) >= 0)
                throw new ArgumentException("a batch file cannot be given an argument with a line break: run the program itself instead");
            bool quote = arg.Length == 0 || arg.EndsWith("\\", StringComparison.Ordinal) || !IsPlain(arg);
            if (quote) line.Append('"');
            int backslashes = 0;
            foreach (char c in arg)
            {
                if (c == '\\')
                {
                    backslashes++;
                    line.Append(c);
                    continue;
                }
                if (c == '"')
                {
                    line.Append('\\', backslashes);  // for the program the batch file hands it on to
                    line.Append('"');
                }
                else if (c == '%')
                {
                    line.Append("%%cd:~,");
                }
                backslashes = 0;
                line.Append(c);
            }
            if (quote)
            {
                line.Append('\\', backslashes);
                line.Append('"');
            }
        }

        /// <summary>Letters, digits and `-_./:\+@`: nothing cmd.exe or a batch file's %1 splitting treats specially.</summary>
        private static bool IsPlain(string arg)
        {
            foreach (char c in arg)
            {
                bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "-_./:\\+@".IndexOf(c) >= 0;
                if (!plain) return false;
            }
            return true;
        }

        /// <summary>cmd.exe in the system folder (never one found on PATH or in the current folder).</summary>
        public static string SystemCmd()
        {
            return Path.Combine(Environment.GetFolderPath(Environment.SpecialFolder.System), "cmd.exe");
        }
    }
}
