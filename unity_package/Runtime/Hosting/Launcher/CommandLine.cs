using System.Collections.Generic;
using System.Text;

namespace CoreAI.Launcher
{
    /// <summary>Builds ProcessStartInfo.Arguments strings that .NET and Mono split back into the same list.</summary>
    internal static class CommandLine
    {
        /// <summary>Joins `args`, quoting each as the Windows argv rules (which .NET and Mono use) need.</summary>
        public static string Join(IEnumerable<string> args)
        {
            StringBuilder line = new StringBuilder();
            foreach (string arg in args)
            {
                if (line.Length > 0) line.Append(' ');
                Append(line, arg ?? "");
            }
            return line.ToString();
        }

        private static void Append(StringBuilder line, string arg)
        {
            if (arg.Length > 0 && arg.IndexOfAny(new[] { ' ', '\t', '\n', '"', '\'' }) < 0)
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
                if (c == '"')
                {
                    // Backslashes before a quote are doubled, and the quote itself escaped.
                    line.Append('\\', backslashes * 2 + 1);
                }
                else
                {
                    line.Append('\\', backslashes);
                }
                backslashes = 0;
                line.Append(c);
            }
            line.Append('\\', backslashes * 2); // before the closing quote
            line.Append('"');
        }
    }
}
