using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Threading;

namespace CoreAI.Launcher
{
    /// <summary>Spawning, probing and stopping the runtime process.</summary>
    internal static class ProcessControl
    {
        private const int SigTerm = 15;

        /// <summary>
        /// How the runtime is started: `exe args`, nothing redirected through a pipe (the runtime writes its output to
        /// `--log-file` itself, so a pipe that a reloaded script domain stops reading can never silence or block it).
        /// On Unix (`windows` false) a shell `exec`s the runtime with its output appended to the log as well, so even
        /// what fails before the runtime opens its log (a missing library, a bad interpreter) lands there, and the pid
        /// is still the runtime's own.
        /// </summary>
        public static ProcessStartInfo StartInfo(string exe, IList<string> args, IDictionary<string, string> env, string workDir,
            string logPath, bool windows)
        {
            ProcessStartInfo info;
            if (windows)
            {
                info = new ProcessStartInfo(exe, CommandLine.Join(args));
            }
            else
            {
                List<string> shellArgs = new List<string>();
                shellArgs.Add("-c");
                shellArgs.Add("exec \"$@\" >>\"$COREAI_RUNTIME_LOG\" 2>&1");
                shellArgs.Add("coreai-runtime");
                shellArgs.Add(exe);
                shellArgs.AddRange(args);
                info = new ProcessStartInfo("/bin/sh", CommandLine.Join(shellArgs));
                info.EnvironmentVariables["COREAI_RUNTIME_LOG"] = logPath;
            }
            info.UseShellExecute = false;
            info.CreateNoWindow = true;
            info.RedirectStandardInput = false;
            info.RedirectStandardOutput = false;
            info.RedirectStandardError = false;
            info.WorkingDirectory = workDir;
            foreach (KeyValuePair<string, string> pair in env) info.EnvironmentVariables[pair.Key] = pair.Value;
            return info;
        }

        /// <summary>Starts the runtime (see <see cref="StartInfo"/>) and ties it to this process.</summary>
        public static Process Spawn(string exe, IList<string> args, IDictionary<string, string> env, string workDir, string logPath)
        {
            Process process = Process.Start(StartInfo(exe, args, env, workDir, logPath, Platform.IsWindows));
            ProcessLifeline.TieToThisProcess(process); // Windows: dies with the game even if the game is killed
            return process;
        }

        /// <summary>True while a process with this id runs (a zombie counts as gone).</summary>
        public static bool IsAlive(int pid)
        {
            if (pid <= 0) return false;
            try
            {
                using (Process process = Process.GetProcessById(pid))
                {
                    if (process.HasExited) return false;
                }
            }
            catch (ArgumentException)
            {
                return false;
            }
            catch (InvalidOperationException)
            {
                return false;
            }
            return !IsZombie(pid);
        }

        private static bool IsZombie(int pid)
        {
            string stat = "/proc/" + pid + "/stat";
            try
            {
                if (!File.Exists(stat)) return false;
                string text = File.ReadAllText(stat);
                int close = text.LastIndexOf(')');
                return close > 0 && close + 2 < text.Length && text[close + 2] == 'Z';
            }
            catch (IOException)
            {
                return false;
            }
            catch (UnauthorizedAccessException)
            {
                return false;
            }
        }

        /// <summary>
        /// Stops the runtime gracefully, then kills it after `timeout`: first the authenticated Shutdown call (every OS;
        /// the only graceful way on Windows, which has no SIGTERM), else SIGTERM on Unix; a runtime that does not exit
        /// in time is killed. `baseUrl` and `token` null: no call (a process that is not a runtime of ours).
        /// </summary>
        public static void Stop(int pid, Process owned, TimeSpan timeout, string baseUrl, string token)
        {
            if (!IsAlive(pid)) return;
            bool asked = !string.IsNullOrEmpty(baseUrl) && !string.IsNullOrEmpty(token)
                && HealthProbe.RequestShutdown(baseUrl, token, ShutdownCallTimeout(timeout));
            if (!asked)
            {
                if (Platform.IsWindows) Kill(pid, owned);
                else Terminate(pid);
            }
            DateTime deadline = DateTime.UtcNow + timeout;
            while (DateTime.UtcNow < deadline)
            {
                if (!IsAlive(pid)) return;
                Thread.Sleep(50);
            }
            Kill(pid, owned);
            DateTime killDeadline = DateTime.UtcNow + TimeSpan.FromSeconds(5);
            while (IsAlive(pid) && DateTime.UtcNow < killDeadline) Thread.Sleep(50);
        }

        private static TimeSpan ShutdownCallTimeout(TimeSpan stopTimeout)
        {
            TimeSpan two = TimeSpan.FromSeconds(2);
            return stopTimeout < two ? stopTimeout : two;
        }

        private static void Terminate(int pid)
        {
            if (Posix.Kill(pid, SigTerm) == 0) return;
            try
            {
                using (Process kill = Process.Start(new ProcessStartInfo("kill", "-TERM " + pid) { UseShellExecute = false, CreateNoWindow = true }))
                {
                    kill.WaitForExit(5000);
                }
            }
            catch (System.ComponentModel.Win32Exception)
            {
            }
        }

        private static void Kill(int pid, Process owned)
        {
            try
            {
                if (owned != null)
                {
                    owned.Kill();
                    return;
                }
                using (Process process = Process.GetProcessById(pid)) process.Kill();
            }
            catch (ArgumentException)
            {
            }
            catch (InvalidOperationException)
            {
            }
            catch (System.ComponentModel.Win32Exception)
            {
            }
        }

        /// <summary>True when nothing listens on host:port (checked by binding it).</summary>
        public static bool PortIsFree(string host, int port)
        {
            IPAddress address;
            if (!IPAddress.TryParse(host, out address)) address = IPAddress.Loopback;
            TcpListener listener = new TcpListener(address, port);
            try
            {
                // As the runtime binds (SO_REUSEADDR): a port in TIME_WAIT is free. Windows's
                // ReuseAddress means something else (sharing a bound port), so not there.
                if (!Platform.IsWindows)
                    listener.Server.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.ReuseAddress, true);
                listener.Start();
                return true;
            }
            catch (SocketException)
            {
                return false;
            }
            finally
            {
                try { listener.Stop(); } catch (SocketException) { }
            }
        }
    }
}
