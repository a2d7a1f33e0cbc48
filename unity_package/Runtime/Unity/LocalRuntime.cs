#if !UNITY_5_3_OR_NEWER || UNITY_EDITOR || UNITY_STANDALONE
using System;
using System.Threading;
using System.Threading.Tasks;
using CoreAI.Downloads;
using CoreAI.Launcher;

namespace CoreAI.UnityIntegration
{
    /// <summary>
    /// The runtime a desktop game (or the editor) starts for itself, as the bootstrap drives it: an optional first-launch
    /// model download (cancellable; paused, not lost, when the game quits), then the launcher. Compiled only where
    /// CoreAI.Hosting is (desktop editors and players); elsewhere the bootstrap has remote mode only.
    /// </summary>
    internal sealed class LocalRuntime
    {
        private readonly MainThreadQueue mainThread;
        private readonly Action<RuntimeLauncherEvent> onEvent;
        private readonly CancellationTokenSource cancelDownload = new CancellationTokenSource();
        private readonly CancellationTokenSource pauseDownload = new CancellationTokenSource();
        private readonly CancellationTokenSource ended = new CancellationTokenSource();  // Stop or Detach: no start begins after
        private readonly object gate = new object();
        private RuntimeLauncher launcher;
        private TimeSpan quitTimeout = TimeSpan.FromSeconds(3);

        /// <summary>A local runtime whose launcher events are posted to `mainThread` and handed to `onEvent` there.</summary>
        public LocalRuntime(MainThreadQueue mainThread, Action<RuntimeLauncherEvent> onEvent)
        {
            this.mainThread = mainThread;
            this.onEvent = onEvent;
        }

        /// <summary>The launcher (null until the download, if any, finished).</summary>
        public RuntimeLauncher Launcher
        {
            get { return launcher; }
        }

        /// <summary>Where the runtime answers; null until it is ready.</summary>
        public RuntimeEndpoint Endpoint
        {
            get { return launcher == null ? null : launcher.Endpoint; }
        }

        /// <summary>
        /// Starts with `options`; first downloads the settings' model into persistentDataPath when `download` is set (its
        /// result becomes options.ModelPath). Progress reaches `onProgress` on the main thread.
        /// </summary>
        public Task<RuntimeEndpoint> Start(RuntimeLaunchOptions options, CoreAIRuntimeSettings settings, bool download, string persistentDataPath,
            Action<DownloadProgress> onProgress)
        {
            quitTimeout = options.QuitTimeout;
            if (!download) return Launch(options);
            return FirstLaunchModel.DownloadAsync(settings, persistentDataPath, mainThread, onProgress, cancelDownload.Token, pauseDownload.Token)
                .ContinueWith(model =>
                {
                    options.ModelPath = model.GetAwaiter().GetResult();  // a failed or cancelled download ends the start here
                    return Launch(options);
                }, TaskContinuationOptions.ExecuteSynchronously).Unwrap();
        }

        /// <summary>Cancels the first-launch download (the player chose not to download): nothing of it is kept.</summary>
        public void CancelDownload()
        {
            cancelDownload.Cancel();
        }

        /// <summary>Lets go of the runtime without stopping it (Stop in the editor, a domain reload); a download pauses.</summary>
        public void Detach()
        {
            lock (gate)
            {
                pauseDownload.Cancel();
                if (launcher != null) launcher.Detach();  // first: a start in progress then ends as Detached, not Stopped
                ended.Cancel();
            }
        }

        /// <summary>
        /// Stops the runtime without holding the main thread: it waits at most QuitTimeout for the graceful stop, then
        /// kills the runtime; the rest finishes on a worker. A download pauses (the next launch resumes it).
        /// </summary>
        public void Stop()
        {
            RuntimeLauncher current = End();
            if (current != null) current.StopWithin(quitTimeout);
        }

        private RuntimeLauncher End()
        {
            lock (gate)
            {
                pauseDownload.Cancel();
                ended.Cancel();
                return launcher;
            }
        }


        private Task<RuntimeEndpoint> Launch(RuntimeLaunchOptions options)
        {
            lock (gate)
            {
                if (ended.IsCancellationRequested)
                    return Task.FromException<RuntimeEndpoint>(new RuntimeLaunchException(RuntimeLaunchFailure.Stopped, "the runtime was stopped before it started"));
                launcher = new RuntimeLauncher(options);
                launcher.EventRaised += e => mainThread.Post(() => onEvent(e));
                return launcher.StartAsync(ended.Token);
            }
        }
    }
}
#endif
