// The package's process spawner (internal to CoreAI.Hosting), driven from pytest as the launcher drives it.
using System;
using System.Collections.Generic;
using CoreAI.Launcher;

namespace CoreAI.Tests.UnityLayer
{
    /// <summary>A process the probe started.</summary>
    public sealed class SpawnedHandle
    {
        private readonly SpawnedProcess process;

        internal SpawnedHandle(SpawnedProcess process)
        {
            this.process = process;
        }

        /// <summary>The process id.</summary>
        public int Id => process.Id;

        /// <summary>True once it ended (reaps it).</summary>
        public bool HasExited => process.HasExited;

        /// <summary>Its exit code (128 + signal), or -1.</summary>
        public int ExitCode => process.ExitCode;

        /// <summary>Waits up to `milliseconds`; true when it ended.</summary>
        public bool WaitForExit(int milliseconds) => process.WaitForExit(TimeSpan.FromMilliseconds(milliseconds));

        /// <summary>SIGKILL / TerminateProcess.</summary>
        public void Kill() => process.Kill();
    }

    /// <summary>Calls into ProcessSpawner with plain arguments pythonnet can pass.</summary>
    public static class SpawnProbe
    {
        /// <summary>
        /// Spawns `exe args` with `env` (NAME=value sets a variable, a bare NAME removes it) in `cwd`, output appended to
        /// `log`; `noChdirAction` / `noCloseFromAction` force the fallbacks of older C libraries.
        /// </summary>
        public static SpawnedHandle Spawn(string exe, string[] args, string[] env, string cwd, string log, bool noChdirAction,
            bool noCloseFromAction)
        {
            ProcessSpawner spawner = ProcessSpawner.Current;
            PosixSpawner posix = spawner as PosixSpawner;
            if (posix != null)
            {
                posix.WithoutChdirAction = noChdirAction;
                posix.WithoutCloseFromAction = noCloseFromAction;
            }
            try
            {
                Dictionary<string, string> variables = new Dictionary<string, string>();
                foreach (string pair in env ?? new string[0])
                {
                    int equals = pair.IndexOf('=');
                    if (equals < 0) variables[pair] = null;
                    else variables[pair.Substring(0, equals)] = pair.Substring(equals + 1);
                }
                return new SpawnedHandle(spawner.Spawn(new SpawnRequest
                {
                    Executable = exe,
                    Arguments = new List<string>(args ?? new string[0]),
                    Environment = variables,
                    WorkingDirectory = cwd,
                    LogPath = log,
                }));
            }
            finally
            {
                if (posix != null)
                {
                    posix.WithoutChdirAction = false;
                    posix.WithoutCloseFromAction = false;
                }
            }
        }

        /// <summary>ProcessSpawner.Current.IsAlive.</summary>
        public static bool IsAlive(int pid) => ProcessSpawner.Current.IsAlive(pid);

        /// <summary>ProcessSpawner.Current.Terminate (SIGTERM).</summary>
        public static bool Terminate(int pid) => ProcessSpawner.Current.Terminate(pid);

        /// <summary>This process's id as the spawner sees it.</summary>
        public static int CurrentProcessId => ProcessSpawner.Current.CurrentProcessId;

        /// <summary>The spawner's type name (PosixSpawner here).</summary>
        public static string SpawnerName => ProcessSpawner.Current.GetType().Name;

        /// <summary>The Windows command line for `exe args` (the quoting under test).</summary>
        public static string WindowsLine(string exe, string[] args) => WindowsCommandLine.ForProgram(exe, args);

        /// <summary>The cmd.exe line for the batch file `batch args`.</summary>
        public static string BatchLine(string cmd, string batch, string[] args) => WindowsCommandLine.ForBatch(cmd, batch, args);

        /// <summary>True for a .cmd/.bat path.</summary>
        public static bool IsBatch(string path) => WindowsCommandLine.IsBatch(path);

        /// <summary>The owner-only SDDL for `sid`.</summary>
        public static string OwnerOnlyDacl(string sid) => OwnerOnly.OwnerOnlyDacl(sid);

        /// <summary>The Windows environment block for `env` (on top of this process's).</summary>
        public static string WindowsEnvironment(string[] env)
        {
            Dictionary<string, string> variables = new Dictionary<string, string>();
            foreach (string pair in env)
            {
                int equals = pair.IndexOf('=');
                variables[pair.Substring(0, equals)] = pair.Substring(equals + 1);
            }
            return WindowsSpawner.EnvironmentBlock(new SpawnRequest { Environment = variables });
        }
    }
}
